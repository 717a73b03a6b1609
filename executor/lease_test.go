package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// One holder at a time: a second Acquire of the same table waits until the first
// lease is released; a lease whose holder stopped renewing is taken over after its TTL,
// after OnStale saw it.
func TestLeaseOneHolderAtATime(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	a := &executor.Leases{Store: store, Holder: executor.Holder{Host: "h1", PID: 1, Instance: "a"}, TTL: time.Hour}
	b := &executor.Leases{Store: store, Holder: executor.Holder{Host: "h2", PID: 2, Instance: "b"}, TTL: time.Hour}
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

	// A holder that stops renewing (its clock says the TTL passed) is taken over.
	now := time.Now()
	var mu sync.Mutex
	var staleSeen *executor.LeaseBody
	c := &executor.Leases{Store: store, Holder: executor.Holder{Host: "h3", PID: 3, Instance: "c"}, TTL: time.Minute,
		Now: func() time.Time { return now.Add(2 * time.Hour) },
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
