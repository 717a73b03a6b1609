package keyed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// A target read ahead gives the live scan's rows at the same places, whatever the
// limit (one record held at a time, or all); a target that does not use it (a pruning
// filter, a target set aside) stops it; one never read is stopped without a leak.
func TestTargetReadAhead(t *testing.T) {
	ctx := context.Background()
	var files [][][2]any
	for f := range 5 {
		var rows [][2]any
		for r := range 3 + f {
			rows = append(rows, [2]any{fmt.Sprintf("k%d-%d", f, r), 10*f + r})
		}
		files = append(files, rows)
	}
	_, snap := testTable(t, nil, files...)
	live := targetRows(t, NewTarget(snap, TargetSpec{Select: selectID}), 0, Ranges)
	if len(live) != 3+4+5+6+7 {
		t.Fatalf("live scan: %v", live)
	}
	for _, limit := range []int64{1, 1 << 30} {
		a := StartAhead(ctx, snap, nil, limit)
		got := targetRows(t, NewTarget(snap, TargetSpec{Select: selectID, Ahead: a}), 0, Ranges)
		if !slices.Equal(got, live) {
			t.Errorf("limit %d: read ahead %v, want the live scan's %v", limit, got, live)
		}
		a.Stop() // (again: nothing)
	}
	// A filter prunes the files: the scan is its own, the read ahead stopped.
	a := StartAhead(ctx, snap, nil, 1<<30)
	got := targetRows(t, NewTarget(snap, TargetSpec{Select: selectID, Ahead: a, Filter: expr.In("id", "k1-0", "k3-2")}), 0, Ranges)
	want := slices.DeleteFunc(slices.Clone(live), func(s string) bool { return !strings.HasPrefix(s, "k1-") && !strings.HasPrefix(s, "k3-") })
	if !slices.Equal(got, want) {
		t.Errorf("filtered scan: %v, want the rows of the files that may have the keys, %v", got, want)
	}
	if !a.stopped {
		t.Error("a read ahead not used by a filtered scan was not stopped")
	}
	// Set aside: the spiller scans, the read ahead is stopped.
	dir, err := NewDir(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Remove()
	a = StartAhead(ctx, snap, nil, 1)
	tg := NewTarget(snap, TargetSpec{Select: selectID, All: true, Ahead: a})
	if err := tg.Spill(ctx, dir, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if !a.stopped || len(a.queue) != 0 {
		t.Error("a read ahead of a target set aside was not stopped and emptied")
	}
	if got := targetRows(t, tg, 0, Ranges); !slices.Equal(got, live) {
		t.Errorf("set aside: %v, want %v", got, live)
	}
	// Never read: Stop ends it.
	StartAhead(ctx, snap, nil, 1).Stop()
}
