package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// leaseRoot is where table leases live in a warehouse: <root>/<table path>/<gen>.json.
const leaseRoot = "_orchestrator/table-leases/"

// DefaultLeaseTTL is how long a lease may go unrenewed before another process takes it.
const DefaultLeaseTTL = 30 * time.Second

// LeaseBody is the content of a table lease generation.
type LeaseBody struct {
	Gen      int64          `json:"gen"`
	Seq      int64          `json:"seq"` // writes by its holder (renewals, operations)
	Table    string         `json:"table"`
	Holder   lease.Identity `json:"holder"`
	Task     string         `json:"task"` // the task key
	Engine   Engine         `json:"engine"`
	Acquired time.Time      `json:"acquired"` // by the holder's clock: for people only
	Renewed  time.Time      `json:"renewed"`  // by the holder's clock: for people only
	TTL      lease.Duration `json:"ttl"`
	Released bool           `json:"released,omitempty"`
	// The Spark statement running for the task, so that whoever finds the lease stale
	// can interrupt it.
	SparkRemote    string `json:"spark_remote,omitempty"`
	SparkSession   string `json:"spark_session,omitempty"`
	SparkOperation string `json:"spark_operation,omitempty"`
}

// Leases hands out per-table leases in one warehouse.
type Leases struct {
	Store  objectstore.Store
	Holder lease.Identity
	TTL    time.Duration
	// OnStale is called with a stale lease before it is taken over (the dispatcher
	// interrupts the Spark operation it names); an error keeps it from being taken.
	OnStale func(ctx context.Context, b *LeaseBody) error
	// Now is this process's clock, by which a silent holder is watched and the lease's
	// times are written; nil means time.Now.
	Now func() time.Time
}

func (l *Leases) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Leases) ttl() time.Duration {
	if l.TTL > 0 {
		return l.TTL
	}
	return DefaultLeaseTTL
}

// Lease is a held table lease; Release ends it.
type Lease struct {
	// TookOver is the stale lease this one replaced (nil: none).
	TookOver *LeaseBody
	l        *Leases
	key      string
	mu       sync.Mutex // guards body
	body     LeaseBody
	stop     chan struct{}
	done     chan struct{}
}

func leaseDir(table string) string { return leaseRoot + strings.Trim(table, "/") + "/" }

func leaseKey(table string, gen int64) string {
	return fmt.Sprintf("%s%010d.json", leaseDir(table), gen)
}

// Acquire waits until it holds the lease of the table at path table (below the
// warehouse), for task on engine, and keeps it renewed until Release. A lease held by
// a live process is waited for; a released one, or a stale one by the rule of package
// internal/lease (its holder's process on this host is gone, or its generation and
// renewal count stayed the same for its TTL while we watched, by our clock), is taken
// over.
func (l *Leases) Acquire(ctx context.Context, table, task string, engine Engine) (*Lease, error) {
	wait := 50 * time.Millisecond
	var watch lease.Watch
	for {
		cur, err := l.current(ctx, table)
		if err != nil {
			return nil, err
		}
		gen := int64(1)
		if cur != nil {
			if !cur.Released && !l.stale(&watch, cur) {
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("wait for the lease of table %s (held by %s for %s): %w", table, cur.Holder.Host, cur.Task, context.Cause(ctx))
				case <-time.After(wait):
				}
				wait = min(2*wait, time.Second)
				continue
			}
			if !cur.Released && l.OnStale != nil {
				if err := l.OnStale(ctx, cur); err != nil {
					return nil, fmt.Errorf("take over the stale lease of table %s from %s: %w", table, cur.Task, err)
				}
			}
			gen = cur.Gen + 1
		}
		now := l.now().UTC()
		body := LeaseBody{Gen: gen, Table: table, Holder: l.Holder, Task: task, Engine: engine, Acquired: now, Renewed: now, TTL: lease.Duration(l.ttl())}
		b, _ := json.Marshal(body)
		err = l.Store.PutIfAbsent(ctx, leaseKey(table, gen), bytes.NewReader(b), int64(len(b)))
		if errors.Is(err, objectstore.ErrExist) {
			continue // another process took this generation
		}
		if err != nil {
			return nil, fmt.Errorf("lease of table %s: %w", table, err)
		}
		if cur != nil {
			_ = l.Store.Delete(ctx, leaseKey(table, cur.Gen))
		}
		ls := &Lease{l: l, key: leaseKey(table, gen), body: body, stop: make(chan struct{}), done: make(chan struct{})}
		if cur != nil && !cur.Released {
			ls.TookOver = cur
		}
		go ls.renew()
		return ls, nil
	}
}

// current returns the newest lease generation of a table (nil: none).
func (l *Leases) current(ctx context.Context, table string) (*LeaseBody, error) {
	infos, err := l.Store.List(ctx, leaseDir(table), "")
	if err != nil {
		return nil, fmt.Errorf("lease of table %s: %w", table, err)
	}
	for i := len(infos) - 1; i >= 0; i-- {
		rc, err := l.Store.Get(ctx, infos[i].Key)
		if errors.Is(err, objectstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lease of table %s: %w", table, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("lease of table %s: %w", table, err)
		}
		var b LeaseBody
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("lease of table %s: %s: %w", table, infos[i].Key, err)
		}
		return &b, nil
	}
	return nil, nil
}

// stale reports whether a lease's holder is gone: its process on this host has
// exited, or the lease has not changed for its TTL while w watched it by our clock.
func (l *Leases) stale(w *lease.Watch, b *LeaseBody) bool {
	ttl := time.Duration(b.TTL)
	if ttl <= 0 {
		ttl = l.ttl()
	}
	silent := w.Stale(b.Gen, b.Seq, ttl, l.now())
	return silent || lease.Gone(b.Holder, l.Holder, nil)
}

// renew rewrites the lease every third of its TTL until Release.
func (ls *Lease) renew() {
	defer close(ls.done)
	t := time.NewTicker(ls.l.ttl() / 3)
	defer t.Stop()
	for {
		select {
		case <-ls.stop:
			return
		case <-t.C:
			ls.mu.Lock()
			ls.body.Renewed = ls.l.now().UTC()
			ls.body.Seq++
			ls.mu.Unlock()
			_ = ls.write(context.Background())
		}
	}
}

func (ls *Lease) write(ctx context.Context) error {
	ls.mu.Lock()
	b, _ := json.Marshal(ls.body)
	ls.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, ls.l.ttl())
	defer cancel()
	return ls.l.Store.Put(ctx, ls.key, bytes.NewReader(b), int64(len(b)))
}

// SetOperation records the Spark statement the holder runs (so that a process finding
// the lease stale interrupts it).
func (ls *Lease) SetOperation(ctx context.Context, remote, session, operation string) error {
	ls.mu.Lock()
	ls.body.SparkRemote, ls.body.SparkSession, ls.body.SparkOperation = remote, session, operation
	ls.body.Seq++
	ls.mu.Unlock()
	return ls.write(ctx)
}

// Release ends the lease: the next Acquire takes it at once.
func (ls *Lease) Release(ctx context.Context) error {
	close(ls.stop)
	<-ls.done
	err := ls.l.Store.Delete(ctx, ls.key)
	if errors.Is(err, objectstore.ErrNotExist) {
		return nil
	}
	return err
}

// HolderOf returns the task holding the table's lease ("" when none does).
func (l *Leases) HolderOf(ctx context.Context, table string) (string, error) {
	b, err := l.current(ctx, table)
	if err != nil || b == nil || b.Released {
		return "", err
	}
	return b.Task, nil
}
