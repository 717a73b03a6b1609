package scheduler

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestPage: pages of a long history go on from their cursor, newest first, every run
// once; a filtered page examines at most its scan budget and says where to go on.
func TestPage(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	ctx := context.Background()
	for i := range 250 {
		r := &Record{ID: SlotID("p", at(t0).Add(time.Duration(i)*time.Minute)), Pipeline: "p", Status: Succeeded,
			Trigger: Trigger{Kind: Scheduled}, Created: at(t0).Add(time.Duration(i) * time.Minute)}
		if i%50 == 3 {
			r.Status = Failed
		}
		if err := e.store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	before := int64(0)
	for pages := 0; ; pages++ {
		es, next, err := e.store.Page(ctx, "p", before, 60, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range es {
			seen = append(seen, en.Seq)
		}
		if next == 0 {
			if pages != 4 {
				t.Errorf("%d pages of 60 for 250 runs, want 5", pages+1)
			}
			break
		}
		before = next
	}
	want := make([]int64, 250)
	for i := range want {
		want[i] = int64(250 - i)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("pages listed %d runs (%v...), want 250..1 once each", len(seen), seen[:min(5, len(seen))])
	}
	failed := func(en Entry) bool { return en.Status == Failed }
	es, next, err := e.store.Page(ctx, "p", 0, 10, 100, failed)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Seq != 204 || es[1].Seq != 154 || next != 151 {
		t.Errorf("failed runs within 100 entries: %+v, next %d; want 204 and 154, next 151", es, next)
	}
	es, next, _ = e.store.Page(ctx, "p", next, 10, 1000, failed)
	if len(es) != 3 || es[2].Seq != 4 || next != 0 {
		t.Errorf("the rest: %d runs, next %d; want 104, 54, 4 and the end", len(es), next)
	}
	if lo, hi, err := e.store.Span(ctx, "p"); err != nil || lo != 0 || hi != 250 {
		t.Errorf("span %d..%d (%v), want 0..250", lo, hi, err)
	}
}

// TestPageTimeRange: a time range lists exactly the runs created in it, reading its own
// part of the index (a binary search for its end), even when runs were numbered a little
// out of the order of their creation.
func TestPageTimeRange(t *testing.T) {
	st := NewStore(mem.New(mem.Config{}))
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000
	order := make([]int, n) // the runs created minute by minute, numbered a little out of order
	for i := range order {
		order[i] = i - i%8 + (i%8+3)%8
	}
	for _, k := range order {
		slot := base.Add(time.Duration(k) * time.Minute)
		if err := st.Create(ctx, &Record{ID: SlotID("p", slot), Pipeline: "p", Status: Succeeded, Trigger: Trigger{Kind: Scheduled, Slot: slot}, Attempt: 1, Created: slot}); err != nil {
			t.Fatal(err)
		}
	}
	from, to := base.Add(1500*time.Minute), base.Add(1559*time.Minute)
	before, err := st.SeqAfter(ctx, "p", to)
	if err != nil || before == 0 || before > 1560+timeSlack+10 {
		t.Fatalf("SeqAfter = %d (%v), want a number near 1560", before, err)
	}
	es, next, err := st.PageWith(ctx, "p", PageOptions{Before: before, Limit: 100, Since: from,
		Filter: func(e Entry) bool { return !e.Created.Before(from) && !e.Created.After(to) }})
	if err != nil || next != 0 {
		t.Fatalf("page: %v, next %d", err, next)
	}
	seen := map[time.Time]bool{}
	for _, e := range es {
		seen[e.Created] = true
	}
	if len(es) != 60 || len(seen) != 60 {
		t.Errorf("the range lists %d runs (%d distinct), want the 60 created in it", len(es), len(seen))
	}
}
