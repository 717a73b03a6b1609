package executor_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// One holder at a time: a second Acquire of the same table waits until the first
// lease is released; a lease whose holder stopped renewing is taken over after its TTL,
// after OnStale saw it.
func TestLeaseOneHolderAtATime(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	a := &executor.Leases{Store: store, Holder: lease.Identity{Host: "h1", PID: 1, Instance: "a"}, TTL: time.Hour}
	b := &executor.Leases{Store: store, Holder: lease.Identity{Host: "h2", PID: 2, Instance: "b"}, TTL: time.Hour}
	la, err := a.Acquire(ctx, "sales/customer", "task-a", executor.Local)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *executor.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctx, "sales/customer", "task-b", executor.Spark)
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	select {
	case <-got:
		t.Fatal("a second holder got the lease while the first held it")
	case <-time.After(300 * time.Millisecond):
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		t.Fatal("the waiting holder did not get the lease after the release")
	}

	// A holder that stops renewing is taken over once the lease stayed the same for its
	// TTL (an hour) by the taker's clock, which moves two hours between its looks.
	now := time.Now()
	var mu sync.Mutex
	var staleSeen *executor.LeaseBody
	c := &executor.Leases{Store: store, Holder: lease.Identity{Host: "h3", PID: 3, Instance: "c"}, TTL: time.Minute,
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(2 * time.Hour)
			return now
		},
		OnStale: func(ctx context.Context, body *executor.LeaseBody) error {
			mu.Lock()
			defer mu.Unlock()
			staleSeen = body
			return nil
		}}
	lc, err := c.Acquire(ctx, "sales/customer", "task-c", executor.Local)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Release(ctx)
	mu.Lock()
	defer mu.Unlock()
	if staleSeen == nil || staleSeen.Task != "task-b" {
		t.Errorf("OnStale saw %+v, want the lease of task-b", staleSeen)
	}
}

// Clocks of different hosts are never compared: a holder whose clock is ten hours
// behind keeps its lease while it renews, and a silent holder whose clock is a century
// ahead loses its lease after a TTL of the taker's clock.
func TestLeaseStalenessIgnoresTheHoldersClock(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	behind := &executor.Leases{Store: store, Holder: lease.Identity{Host: "h1", PID: 1, Instance: "a"}, TTL: 2 * time.Second,
		Now: func() time.Time { return time.Now().Add(-10 * time.Hour) }}
	la, err := behind.Acquire(ctx, "sales/customer", "task-a", executor.Local)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	var stale []string
	taker := &executor.Leases{Store: store, Holder: lease.Identity{Host: "h2", PID: 2, Instance: "b"}, TTL: 2 * time.Second,
		OnStale: func(_ context.Context, b *executor.LeaseBody) error {
			stale = append(stale, b.Task)
			return nil
		}}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if lb, err := taker.Acquire(wctx, "sales/customer", "task-b", executor.Local); err == nil {
		lb.Release(ctx)
		t.Fatalf("took the lease of a holder that renews (its clock ten hours behind); OnStale saw %v", stale)
	}

	// A silent holder on another host whose clock is far ahead: taken after a TTL.
	body := `{"gen":1,"seq":4,"table":"sales/orders","holder":{"host":"h9","pid":9,"instance":"z"},"task":"task-z","engine":"local",` +
		`"acquired":"2126-01-01T00:00:00Z","renewed":"2126-01-01T00:00:00Z","ttl":"300ms"}`
	if err := store.Put(ctx, "_orchestrator/table-leases/sales/orders/0000000001.json", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lt, err := taker.Acquire(ctx, "sales/orders", "task-b", executor.Local)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Release(ctx)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("took the silent lease after %v, before its TTL (300ms) passed on the taker's clock", waited)
	}
	if lt.TookOver == nil || lt.TookOver.Task != "task-z" || len(stale) != 1 || stale[0] != "task-z" {
		t.Errorf("took over %+v, OnStale saw %v; want the lease of task-z", lt.TookOver, stale)
	}
}
