package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// The lease decides which of several serve processes on one warehouse schedules it.
// It is a sequence of generation objects, lease/<gen>.json, each created with
// put-if-absent, so exactly one process creates each generation; the newest generation
// is the lease. Its holder renews it by rewriting its own generation (Seq goes up). A
// process that finds the newest generation stale by the rule of package internal/lease
// (unchanged for a whole TTL by its own clock, or held by a process of its own host that
// is gone; no clock is compared with another's), or released, creates the next
// generation, and holds the lease if it wins. A holder that finds a newer generation
// than its own has lost the lease and stops scheduling; the slot ledger keeps even a
// brief overlap of two holders from running a slot twice.

// DefaultLeaseTTL is how long a lease holder may go silent before another serve takes
// over.
const DefaultLeaseTTL = 15 * time.Second

// LeaseBody is the content of a lease generation.
type LeaseBody struct {
	Gen      int64     `json:"gen"`
	Seq      int64     `json:"seq"` // renewals
	Holder   Identity  `json:"holder"`
	Addr     string    `json:"addr,omitempty"` // the holder's HTTP address
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"`
	TTL      Duration  `json:"ttl"`
	Released bool      `json:"released,omitempty"`
	// Pipelines are the pipelines the holder schedules: a CLI trigger of one of them
	// goes to the holder.
	Pipelines []string `json:"pipelines"`
}

// Duration is a time.Duration that reads and writes as text ("15s") in JSON.
type Duration = lease.Duration

func leaseKey(gen int64) string { return fmt.Sprintf("%s%010d.json", leaseDir, gen) }

// CurrentLease returns the newest lease generation of the store (nil when none).
func (s *Store) CurrentLease(ctx context.Context) (*LeaseBody, error) {
	infos, err := s.st.List(ctx, leaseDir, "")
	if err != nil {
		return nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		var b LeaseBody
		err := s.getJSON(ctx, infos[i].Key, &b)
		if errors.Is(err, objectstore.ErrNotExist) {
			continue // deleted by a new holder meanwhile
		}
		if err != nil {
			return nil, err
		}
		return &b, nil
	}
	return nil, nil
}

// Live reports whether a serve holds the lease as seen at now by a process that looks
// once (the CLI): renewed within its TTL and not released. It compares the holder's
// clock with now, so it assumes clocks agree within the TTL.
func (b *LeaseBody) Live(now time.Time) bool {
	return b != nil && !b.Released && now.Sub(b.Renewed) < time.Duration(b.TTL)
}

// Schedules reports whether the holder schedules pipeline.
func (b *LeaseBody) Schedules(pipeline string) bool {
	return b != nil && slices.Contains(b.Pipelines, pipeline)
}

// serveLease is one process's view of a store's lease.
type serveLease struct {
	store *Store

	mu      sync.Mutex // guards the fields below; a step holds it
	held    bool
	wasHeld bool // held at the previous step
	gen     int64
	body    LeaseBody // the newest generation as last read (ours when held)

	watch     lease.Watch // the newest generation of another holder, by our clock
	renewedOK time.Time   // our last successful renewal
	lastCheck time.Time   // the last liveness check of the store (Scheduler.Tick)
}

// leaseConfig is what a lease step needs to know of its process.
type leaseConfig struct {
	id        Identity
	addr      string
	ttl       time.Duration
	pipelines []string
	alive     func(host string, pid int) bool
}

// step acquires, renews or watches the lease at now and reports whether this process
// holds it.
func (l *serveLease) step(ctx context.Context, now time.Time, c leaseConfig) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, err := l.store.CurrentLease(ctx)
	if err != nil {
		return l.stillHeld(now, c), fmt.Errorf("read lease: %w", err)
	}
	if cur == nil {
		return l.claim(ctx, now, c, 1)
	}
	if cur.Holder.Instance == c.id.Instance {
		return l.renew(ctx, now, c, cur)
	}
	if l.held {
		l.held = false // a newer generation is someone else's
	}
	l.body = *cur
	silent := l.watch.Stale(cur.Gen, cur.Seq, time.Duration(cur.TTL), now)
	if cur.Released || silent || lease.Gone(cur.Holder, c.id, c.alive) {
		return l.claim(ctx, now, c, cur.Gen+1)
	}
	return false, nil
}

// stillHeld is whether a holder that cannot reach the store may go on scheduling: only
// while its last renewal is well within the TTL.
func (l *serveLease) stillHeld(now time.Time, c leaseConfig) bool {
	if l.held && now.Sub(l.renewedOK) > c.ttl*2/3 {
		l.held = false
	}
	return l.held
}

func (l *serveLease) claim(ctx context.Context, now time.Time, c leaseConfig, gen int64) (bool, error) {
	b := LeaseBody{Gen: gen, Holder: c.id, Addr: c.addr, Acquired: now.UTC(), Renewed: now.UTC(), TTL: Duration(c.ttl), Pipelines: c.pipelines}
	err := l.store.putJSON(ctx, leaseKey(gen), b, true)
	if errors.Is(err, objectstore.ErrExist) {
		return false, nil // another process claimed it first
	}
	if err != nil {
		return false, fmt.Errorf("claim lease: %w", err)
	}
	l.held, l.gen, l.body, l.renewedOK = true, gen, b, now
	// Older generations are history now.
	infos, err := l.store.st.List(ctx, leaseDir, "")
	if err == nil {
		for _, in := range infos {
			if in.Key < leaseKey(gen) {
				_ = l.store.st.Delete(ctx, in.Key)
			}
		}
	}
	return true, nil
}

// renew rewrites our generation, at most every third of the TTL unless the pipelines
// changed.
func (l *serveLease) renew(ctx context.Context, now time.Time, c leaseConfig, cur *LeaseBody) (bool, error) {
	l.held, l.gen = true, cur.Gen
	if l.renewedOK.IsZero() {
		l.renewedOK = now
	}
	same := strings.Join(cur.Pipelines, "\n") == strings.Join(c.pipelines, "\n") && cur.Addr == c.addr
	if same && now.Sub(cur.Renewed) < c.ttl/3 && !cur.Released {
		l.body = *cur
		return true, nil
	}
	b := *cur
	b.Seq++
	b.Renewed, b.Pipelines, b.Addr, b.TTL, b.Released = now.UTC(), c.pipelines, c.addr, Duration(c.ttl), false
	if err := l.store.putJSON(ctx, leaseKey(cur.Gen), b, false); err != nil {
		return l.stillHeld(now, c), fmt.Errorf("renew lease: %w", err)
	}
	l.body, l.renewedOK = b, now
	return true, nil
}

// release gives the lease up at once (a clean shutdown), so a standby takes over
// without waiting for the TTL.
func (l *serveLease) release(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return nil
	}
	b := l.body
	b.Released, b.Renewed, b.Seq = true, now.UTC(), b.Seq+1
	l.held = false
	return l.store.putJSON(ctx, leaseKey(l.gen), b, false)
}
