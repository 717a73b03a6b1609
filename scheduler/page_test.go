package scheduler

import (
	"context"
	"slices"
	"testing"
	"time"
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
