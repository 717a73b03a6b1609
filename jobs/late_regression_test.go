package jobs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The smallest streams found wrong from outside, each over several runs, checked against
// the reference.
func TestLateEventsOverRuns(t *testing.T) {
	up := func(city string, at int64) cdcEvent {
		return cdcEvent{id: "K1", city: city, name: "n", op: "U", at: at}
	}
	del := func(at int64) cdcEvent { return cdcEvent{id: "K1", op: "D", at: at} }
	nulls := func(at int64) cdcEvent { return cdcEvent{id: "K1", op: "U", at: at} }
	for _, tc := range []struct {
		name string
		mode cdcMode
		runs [][]cdcEvent
		want string // the table's rows, when the test says them too
	}{
		// scd1 kept the older of two events logged in one batch when a key had a late
		// event in it: a later late event then won.
		{"scd1/repeat-in-batch", cdcSCD1, [][]cdcEvent{{up("X", 6)}, {up("S", 2), up("T", 9), up("S", 13)}, {up("A", 11)}}, "[K1 n S]"},
		{"scd1/deletes-in-batch", cdcSCD1, [][]cdcEvent{{up("X", 6)}, {del(2), up("T", 9), del(13)}, {up("A", 11)}}, ""},
		// A version whose non-key columns are all NULL reads like a tombstone; a late
		// event before it dropped it.
		{"tombstone/all-null-version", cdcTombstone, [][]cdcEvent{{up("B", 13)}, {nulls(11)}, {up("E", 7)}}, ""},
		{"tombstone/all-null-first", cdcTombstone, [][]cdcEvent{{nulls(11)}, {up("B", 13)}, {up("C", 15)}}, ""},
		{"tombstone/null-then-delete", cdcTombstone, [][]cdcEvent{{up("A", 1)}, {nulls(5)}, {del(8)}, {up("C", 3)}}, ""},
		{"tombstone/delete-then-null", cdcTombstone, [][]cdcEvent{{up("A", 1)}, {del(5)}, {nulls(8)}, {del(9)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCDCModePipeline(t, mem.New(mem.Config{}), tc.mode)
			var all []cdcEvent
			for i, r := range tc.runs {
				all = append(all, r...)
				if err := p.run(t, [][]cdcEvent{r}); err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
			}
			want := tc.mode.reference(t, all)
			if tc.want != "" && want != tc.want {
				t.Fatalf("the reference says %q, the test %q", want, tc.want)
			}
			if got := tc.mode.table(t, p); got != want {
				t.Fatalf("after %d runs:\n%s\nwant:\n%s", len(tc.runs), got, want)
			}
		})
	}
}

// The tombstone case in the dimension's own terms: [07,11) [11,13) [13,∞).
func TestTombstoneAllNullVersionIntervals(t *testing.T) {
	p := newCDCModePipeline(t, mem.New(mem.Config{}), cdcTombstone)
	for _, r := range [][]cdcEvent{{{id: "K1", city: "B", name: "n", op: "U", at: 13}}, {{id: "K1", op: "U", at: 11}}, {{id: "K1", city: "E", name: "n", op: "U", at: 7}}} {
		if err := p.run(t, [][]cdcEvent{r}); err != nil {
			t.Fatal(err)
		}
	}
	at := func(m int) string { return fmt.Sprint(cdcBase.Add(time.Duration(m) * time.Minute).UnixMicro()) }
	got := p.dimension(t)
	for _, iv := range []string{"[" + at(7) + "," + at(11) + ")", "[" + at(11) + "," + at(13) + ")", "[" + at(13) + "," + fmt.Sprint(SeqMax) + ")"} {
		if !strings.Contains(got, iv) {
			t.Errorf("no version %s in\n%s", iv, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 3 {
		t.Errorf("%d versions, want 3:\n%s", n, got)
	}
}
