package jobs

import (
	"fmt"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
		// After a late upsert of NULLs right before a delete, the dimension held two
		// all-NULL versions in a row; a later upsert of NULLs was taken for a repeat of
		// the second (read as an upsert of NULLs), where it follows a delete.
		{"tombstone/nulls-after-late-nulls", cdcTombstone, [][]cdcEvent{{up("P", 25), del(39)}, {nulls(27)}, {nulls(42)}}, ""},
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

// A NULL business key is refused where it enters: an upsert ingest names the file,
// line and column; a merge names the source version, the row's file and the key column,
// and writes nothing; where lets the stage pass such rows, counting them.
func TestNullKeyRefused(t *testing.T) {
	for _, mode := range []cdcMode{cdcSCD2, cdcSCD1} {
		t.Run(string(mode), func(t *testing.T) {
			p := newCDCModePipeline(t, mem.New(mem.Config{}), mode)
			if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Oslo", name: "n", op: "U", at: 1}}}); err != nil {
				t.Fatal(err)
			}
			before := tableRows(t, p.env, p.dim, "customer_id", "city")
			err := p.run(t, [][]cdcEvent{{{id: "", city: "Rome", name: "n", op: "U", at: 2}, {id: "K1", city: "Rome", name: "n", op: "U", at: 3}}})
			for _, want := range []string{"source bronze.events", "version 2", "events/00002.csv", "key column customer_id is NULL", `where: "customer_id IS NOT NULL"`} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("merge of a NULL key: %v; want it refused naming %q", err, want)
				}
			}
			if got := tableRows(t, p.env, p.dim, "customer_id", "city"); !slices.Equal(got, before) {
				t.Fatalf("the refused merge changed the table: %v, was %v", got, before)
			}
			switch m := p.merge.(type) {
			case *SCD2Merge:
				m.cfg.Where = "customer_id IS NOT NULL"
			case *SCD1Merge:
				m.cfg.Where = "customer_id IS NOT NULL"
			}
			res, err := p.merge.Run(t.Context(), p.env)
			if err != nil {
				t.Fatalf("with where: %v", err)
			}
			if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "1 source rows not merged") }) {
				t.Errorf("notes %q do not count the row where left out", res.Notes)
			}
			want := "K1|Oslo|false K1|Rome|true"
			cols := []string{"customer_id", "city", "is_current"}
			if mode == cdcSCD1 {
				want, cols = "K1|Rome", cols[:2]
			}
			if got := strings.Join(tableRows(t, p.env, p.dim, cols...), " "); got != want {
				t.Errorf("table %q, want %q", got, want)
			}
		})
	}
	t.Run("upsert ingest", func(t *testing.T) {
		bronze := &Table{Name: "bronze.c", Path: "bronze/c", Schema: schemaOf(t, "customer_id string", "city string", "source_file string", "load_timestamp timestamp")}
		env, landing := ingestEnv(t, mem.New(mem.Config{}), bronze)
		putFile(t, landing, "c/1.csv", "customer_id,city\nK1,Oslo\n,Rome\n")
		_, err := NewIngest("load", &IngestConfig{Source: "/landing/c/*.csv", Target: bronze.Name, Mode: "upsert", Keys: []string{"customer_id"}}).Run(t.Context(), env)
		if err == nil || !strings.Contains(err.Error(), "c/1.csv:3") || !strings.Contains(err.Error(), "customer_id") {
			t.Fatalf("upsert of a NULL key: %v; want it refused naming the file, line 3 and the column", err)
		}
	})
}

// Four runs of one ingest at once over seven files, in each mode: every run succeeds
// (a commit lost to another run's commit of the same file means the file is loaded),
// each file is committed once and the table holds each row once.
func TestIngestRacingRunsAllSucceed(t *testing.T) {
	for _, mode := range []string{"append", "upsert", "upsert/sequence_by"} {
		t.Run(mode, func(t *testing.T) {
			sales := salesTable(t)
			// Commits take a while, as on a disk or S3, so that the runs race for them.
			slow := faultstore.New(mem.New(mem.Config{}))
			slow.OnOp(func(op faultstore.Op, key string) {
				if op == faultstore.OpPutIfAbsent && strings.Contains(key, "_delta_log/") {
					time.Sleep(time.Duration(1+rand.IntN(8)) * time.Millisecond)
				}
			})
			env, landing := ingestEnv(t, slow, sales)
			var want []string
			for f := range 7 {
				var lines []string
				for r := range 50 {
					id := fmt.Sprintf("T%d-%02d", f, r)
					lines = append(lines, fmt.Sprintf("%s,%d,1.00,2026-01-14T09:%02d:00Z", id, r, f))
					want = append(want, fmt.Sprintf("%s|%d", id, r))
				}
				putFile(t, landing, fmt.Sprintf("sales/sales_%03d.csv", f), "id,qty,amount,sold_at\n"+strings.Join(lines, "\n")+"\n")
			}
			slices.Sort(want)
			cfg := &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name}
			switch mode {
			case "upsert":
				cfg.Mode, cfg.Keys = "upsert", []string{"id"}
			case "upsert/sequence_by":
				cfg.Mode, cfg.Keys, cfg.SequenceBy = "upsert", []string{"id"}, "sold_at"
			}
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() { _, errs[i] = NewIngest("ingest", cfg).Run(t.Context(), env) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("run %d: %v", i+1, err)
				}
			}
			if got := tableRows(t, env, sales, "id", "qty"); !slices.Equal(got, want) {
				t.Fatalf("rows after four racing runs:\n%s", diff(got, want))
			}
		})
	}
}
