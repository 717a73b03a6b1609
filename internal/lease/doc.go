// Package lease holds what the warehouse's leases share: the serve lease (which serve
// schedules a warehouse, package scheduler) and the table leases (which stage attempt
// writes a table, package executor). Both are a sequence of generation objects created
// with put-if-absent; the holder renews its generation by rewriting it with a higher
// renewal count (Seq).
//
// Staleness has one rule, and it never compares one host's clock with another's: an
// observer watches the newest generation and calls it stale when its generation and
// renewal count have not changed for the lease's TTL as measured by the observer's own
// clock (Watch), or when its holder is a process of the observer's host that is gone
// (Gone). A holder's recorded renewal time is for people to read, never for a decision.
package lease
