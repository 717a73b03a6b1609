package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// numRecords reads an add action's row count from its stats.
func numRecords(t *testing.T, a *delta.Add) int64 {
	t.Helper()
	var st struct{ NumRecords int64 }
	if err := json.Unmarshal([]byte(a.Stats), &st); err != nil {
		t.Fatalf("stats of %s: %v", a.Path, err)
	}
	return st.NumRecords
}

// dataObjects lists the objects below a table's root that are not in its log.
func dataObjects(t *testing.T, s objectstore.Store, root string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), root+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, root+"/_delta_log/") {
			out = append(out, o.Key)
		}
	}
	return out
}

func TestParallelWriterLanes(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("StreamFiles=%v", stream), func(t *testing.T) {
			ctx := context.Background()
			decl := &Table{Name: "bronze.t", Path: "bronze/t", Schema: schemaOf(t, "id int", "name string")}
			env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, decl)
			tbl, err := env.openOrCreate(ctx, decl)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w, err := newParallelWriter(ctx, snap, 3, delta.WriteOptions{StreamFiles: stream})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for b := range 7 { // batch b has b+1 rows
				var rows [][]any
				for i := range b + 1 {
					id := b*10 + i
					rows = append(rows, []any{id, fmt.Sprint("n", id)})
					want = append(want, fmt.Sprintf("%d|n%d", id, id))
				}
				rec := record(t, snap.Schema(), rows...)
				err := w.write(rec, "f.csv")
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			adds, err := w.close()
			if err != nil {
				t.Fatal(err)
			}
			// Batches go round the lanes: 0, 3, 6 | 1, 4 | 2, 5, and the adds come lane by lane.
			var got []int64
			for _, a := range adds {
				got = append(got, numRecords(t, a))
			}
			if wantRows := []int64{1 + 4 + 7, 2 + 5, 3 + 6}; !slices.Equal(got, wantRows) {
				t.Fatalf("rows per file %v, want %v", got, wantRows)
			}
			tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
			tx.AddFiles(adds...)
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			if rows := tableRows(t, env, decl); !slices.Equal(rows, want) {
				t.Fatalf("rows:\n%s", diff(rows, want))
			}
		})
	}
}

func TestParallelWriterLaneError(t *testing.T) {
	ctx := context.Background()
	decl := &Table{Name: "bronze.t", Path: "bronze/t", Schema: schemaOf(t, "id int", "name string")}
	store := mem.New(mem.Config{})
	env := newTestEnv(store, &testClock{t: t0}, decl)
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newParallelWriter(ctx, snap, 2, delta.WriteOptions{StreamFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	good := record(t, snap.Schema(), []any{1, "a"})
	defer good.Release()
	bad := record(t, schemaOf(t, "id int", "name string", "extra string"), []any{2, "b", "x"})
	defer bad.Release()
	if err := w.write(good, "a.csv"); err != nil {
		t.Fatal(err)
	}
	if err := w.write(bad, "b.csv"); err != nil { // lane 1 fails on it, later
		t.Fatal(err)
	}
	for range 100 {
		if err = w.write(good, "c.csv"); err != nil {
			break
		}
	}
	if err == nil {
		_, err = w.close()
	} else {
		w.abort()
	}
	if err == nil || !strings.HasPrefix(err.Error(), "b.csv: ") || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("err = %v, want the lane's error naming b.csv and the column", err)
	}
	if objs := dataObjects(t, store, "bronze/t"); len(objs) != 0 {
		t.Fatalf("objects left by the failed write: %v, want none (streamed files are not published)", objs)
	}
}

// withLanes lowers the source size per lane so that even tiny loads get every lane the
// machine allows, for the test's duration.
func withLanes(t *testing.T) {
	old := laneSourceBytes
	laneSourceBytes = 1
	t.Cleanup(func() { laneSourceBytes = old })
}

func TestIngestAppendParallel(t *testing.T) {
	withLanes(t)
	sales := salesTable(t)
	store := mem.New(mem.Config{})
	env, landing := ingestEnv(t, store, sales)
	var want []string
	for f := range 4 {
		body := "id,qty,amount,sold_at\n"
		for i := range 50 {
			id := fmt.Sprintf("T%d-%02d", f, i)
			body += fmt.Sprintf("%s,%d,%d.25,2026-01-14T09:%02d:00Z\n", id, i, f, i)
			want = append(want, fmt.Sprintf("%s|%d|%d.25|/landing/sales/%d.csv", id, i, f, f))
		}
		putFile(t, landing, fmt.Sprintf("sales/%d.csv", f), body)
	}
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, BatchSize: 16})
	res := runStage(t, stage, env)
	lanes := ingestLanes(1 << 20)
	if res.RowsWritten != 200 || len(res.VersionsWritten) != 1 || res.FilesWritten != int64(lanes) {
		t.Fatalf("result %+v, want 200 rows in %d files (one per lane) in one commit", res, lanes)
	}
	slices.Sort(want)
	if got := tableRows(t, env, sales, "id", "qty", "amount", "source_file"); !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	if res := runStage(t, stage, env); len(res.VersionsWritten) != 0 {
		t.Fatalf("rerun wrote %+v, want nothing", res.VersionsWritten)
	}

	t.Run("a bad record leaves the table and the store unchanged", func(t *testing.T) {
		sales := salesTable(t)
		store := mem.New(mem.Config{})
		env, landing := ingestEnv(t, store, sales)
		putFile(t, landing, "sales/a.csv", day1)
		putFile(t, landing, "sales/b.csv", day2)
		putFile(t, landing, "sales/c.csv", "id,qty,amount,sold_at\nT9,x,1.00,2026-01-16T08:00:00Z\n")
		_, err := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, BatchSize: 1}).Run(context.Background(), env)
		var de *decode.Error
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "/landing/sales/c.csv:2: column qty") {
			t.Fatalf("err = %v, want the decode error of c.csv line 2", err)
		}
		if v := tableVersion(t, env, sales); v != -1 {
			t.Errorf("table at version %d, want none (unchanged)", v)
		}
		if objs := dataObjects(t, store, "bronze/sales"); len(objs) != 0 {
			t.Errorf("data files left behind: %v, want none", objs)
		}
	})

	t.Run("a crash at any store operation, then a rerun, loads every row once", func(t *testing.T) {
		setup := func() (*faultstore.Store, *Env, *Table) {
			sales := salesTable(t)
			fs := faultstore.New(mem.New(mem.Config{}))
			env, landing := ingestEnv(t, fs, sales)
			putFile(t, landing, "sales/a.csv", day1)
			putFile(t, landing, "sales/b.csv", day2)
			return fs, env, sales
		}
		stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: "bronze.sales", BatchSize: 1})
		crashAtEveryOperation(t, stage, setup, rowsOf(t))
	})
}
