// Package web is what people and programs see of a serve: server-rendered pages (the
// pipelines, a run, the runs grid of a pipeline, and the temporal table pages: schema,
// history, rows as of a version or time, change feed, diff by key, change feed
// consumers against the retention horizons), the JSON API under /api/v1/ that carries
// everything the pages show (described by /api/v1/openapi.json), live run updates over
// Server-Sent Events, /metrics for Prometheus and /healthz.
//
// It reads runs through the scheduler (live records of the runs this process has in
// charge, the run store's index for lists) and tables through delta, and asks the
// scheduler to trigger, retry and cancel runs; it decides nothing about when a run
// happens and spells no Delta property or log path.
//
// Invariants:
//   - Only tables that a loaded pipeline declares can be opened, by their declared name;
//     no part of a request becomes a store key, so nothing outside a warehouse is read.
//   - Every value shown is escaped by html/template (or is JSON); pages and assets come
//     from the binary (go:embed), so they work offline, and read without JavaScript.
//   - A listener on another address than loopback needs a token (New refuses
//     otherwise); a request that changes state needs the full token (a read-only token
//     gets 403) and comes from the page's own origin (CSRF).
//   - Every request is bounded: body size, rows returned, rows read for a diff, runs
//     examined for a filtered list, and the server's read and write timeouts.
//   - Many clients watching one run cost one rendering of its page and JSON per change
//     of its record (at most one a second), never one each.
package web
