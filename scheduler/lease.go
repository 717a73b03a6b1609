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
	b, _, err := s.currentLease(ctx)
	return b, err
}

// currentLease is CurrentLease with the generation object's modification time, by the
// store's clock.
func (s *Store) currentLease(ctx context.Context) (*LeaseBody, time.Time, error) {
	infos, err := s.st.List(ctx, leaseDir, "")
	if err != nil {
		return nil, time.Time{}, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		var b LeaseBody
		err := s.getJSON(ctx, infos[i].Key, &b)
		if errors.Is(err, objectstore.ErrNotExist) {
			continue // deleted by a new holder meanwhile
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		return &b, infos[i].ModTime, nil
	}
	return nil, time.Time{}, nil
}

// LiveLease returns the newest lease generation when, as one look at the store tells, a
// serve holds it; nil when none does. A process that looks once (the CLI, a cancel, a
// hand-off) cannot watch the lease for a TTL, so it asks the store's clock: the
// generation was rewritten within its TTL when its modification time is within the TTL
// of a probe object this look writes (and removes), both stamped by the store. It is not
// live when released, or held by a process of this host that is gone. No
// host's clock is compared with another's, and the holder's recorded renewal time is
// never used.
func (s *Store) LiveLease(ctx context.Context) (*LeaseBody, error) {
	observer := lease.Local()
	b, renewed, err := s.currentLease(ctx)
	if err != nil || b == nil || b.Released || lease.Gone(b.Holder, observer, nil) {
		return nil, err
	}
	now, err := s.storeNow(ctx, observer)
	if err != nil {
		return nil, fmt.Errorf("read the store's clock: %w", err)
	}
	if now.Sub(renewed) >= time.Duration(b.TTL) {
		return nil, nil
	}
	return b, nil
}

// storeNow is the store's clock now: the modification time it stamps on a probe object
// written for the purpose (and removed).
func (s *Store) storeNow(ctx context.Context, observer Identity) (time.Time, error) {
	key := fmt.Sprintf("%sclock-%s-%d-%s", leaseProbeDir, observer.Host, observer.PID, observer.Instance)
	if err := s.st.Put(ctx, key, strings.NewReader("{}\n"), 3); err != nil {
		return time.Time{}, err
	}
	defer s.st.Delete(context.WithoutCancel(ctx), key)
	info, err := s.st.Stat(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	return info.ModTime, nil
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
