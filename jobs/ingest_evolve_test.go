package jobs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A column declared after the table was created: the run adds it in a metadata-only
// commit before loading; a file written before that (a late delivery of the old
// extract) reads it as NULL without allow_missing_columns, a file written after it that
// lacks it is refused naming the file and the column, and a file with a column the
// table does not declare is refused naming the file, the column and what to declare.
func TestIngestFollowsDeclaredColumns(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: t0}
	sales := &Table{Name: "bronze.sales", Path: "bronze/sales", Schema: schemaOf(t, "id string", "qty int", "source_file string")}
	env := newTestEnv(mem.New(mem.Config{}), clock, sales)
	landing := mem.New(mem.Config{Now: clock.Now})
	env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
		return landing, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
	}
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name})
	putFile(t, landing, "sales/1.csv", "id,qty\nA,1\n")
	runStage(t, stage, env)
	clock.Advance(time.Hour)
	putFile(t, landing, "sales/2-old.csv", "id,qty\nB,2\n") // written before the column, delivered late

	clock.Advance(time.Hour)
	sales.Schema = schemaOf(t, "id string", "qty int", "source_file string", "channel string")
	clock.Advance(time.Hour)
	putFile(t, landing, "sales/3.csv", "id,qty,channel\nC,3,web\n")
	res := runStage(t, stage, env)
	if res.RowsWritten != 2 {
		t.Fatalf("second run wrote %d rows, want B and C", res.RowsWritten)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "2-old.csv lacks the columns channel: filled with NULL (added to the table after the file was written)")
	}) {
		t.Errorf("notes %q do not say why 2-old.csv's channel is NULL", res.Notes)
	}
	want := []string{"A|1|/landing/sales/1.csv|NULL", "B|2|/landing/sales/2-old.csv|NULL", "C|3|/landing/sales/3.csv|web"}
	if got := tableRows(t, env, sales); !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	tbl, err := delta.Open(ctx, env.Warehouse, sales.Path, env.Delta)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tbl.History(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Operation != delta.OpAddColumns || h[0].Operation != "WRITE" {
		t.Fatalf("history %+v, want ADD COLUMNS then the load", h)
	}

	clock.Advance(time.Hour)
	putFile(t, landing, "sales/4.csv", "id,qty\nD,4\n")
	_, err = stage.Run(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "sales/4.csv") || !strings.Contains(err.Error(), "lacks the declared column channel") {
		t.Fatalf("a new file without the new column: %v, want it refused naming the file and the column", err)
	}
	landing.Delete(ctx, "sales/4.csv")
	putFile(t, landing, "sales/5.csv", "id,qty,channel,region\nE,5,shop,north\n")
	_, err = stage.Run(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "sales/5.csv") || !strings.Contains(err.Error(), `header column "region" (4) is not declared: declare it on the table ({name: region, type: string}`) {
		t.Fatalf("a file with an undeclared column: %v, want it refused naming the file, the column and the declaration", err)
	}
}

// A crash at any store operation of an ingest whose table gains a declared column (the
// ADD COLUMNS commit, then the load), then reruns: the table's rows, schema and commits
// are exactly an uninterrupted run's.
func TestIngestEvolvingCrashAtEveryOperation(t *testing.T) {
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: t0}
		sales := &Table{Name: "bronze.sales", Path: "bronze/sales", Schema: schemaOf(t, "id string", "qty int", "source_file string")}
		fs := faultstore.New(mem.New(mem.Config{}))
		env := newTestEnv(fs, clock, sales)
		landing := mem.New(mem.Config{Now: clock.Now})
		env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
			return landing, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
		}
		putFile(t, landing, "sales/1.csv", "id,qty\nA,1\n")
		runStage(t, NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name}), env)
		clock.Advance(time.Hour)
		sales.Schema = schemaOf(t, "id string", "qty bigint", "source_file string", "channel string")
		putFile(t, landing, "sales/2.csv", "id,qty,channel\nB,2,web\n")
		return fs, env, sales
	}
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: "bronze.sales"})
	observe := func(env *Env, decl *Table) []string {
		tbl, snap := latest(t, env, decl)
		out := []string{"schema " + snap.Schema().String()}
		h, err := tbl.History(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range h {
			out = append(out, "op "+c.Operation)
		}
		return append(out, tableRows(t, env, decl, "id", "qty", "channel")...)
	}
	want := crashAtEveryOperation(t, stage, setup, observe)
	if !slices.Equal(want, []string{"schema struct<id:string,qty:long,source_file:string,channel:string>", "op WRITE", "op CHANGE COLUMNS", "op WRITE", "op CREATE TABLE", "A|1|NULL", "B|2|web"}) {
		t.Fatalf("clean run: %q", want)
	}
}

// A first run that fails before its first write leaves no table behind (no empty CREATE
// TABLE version 0 in the history); a table another run created, or one holding data,
// stays.
func TestFailedFirstRunLeavesNoTable(t *testing.T) {
	ctx := context.Background()
	sales := &Table{Name: "bronze.sales", Path: "bronze/sales", Schema: schemaOf(t, "id string", "qty int", "source_file string")}
	env, landing := ingestEnv(t, mem.New(mem.Config{}), sales)
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name})
	putFile(t, landing, "sales/1.csv", "id,qty\nA,not a number\n")
	if _, err := stage.Run(ctx, env); err == nil {
		t.Fatal("a bad file loaded")
	}
	if ok, err := delta.Exists(ctx, env.Warehouse, sales.Path); err != nil || ok {
		t.Fatalf("after the failed first run the table exists (%v, %v)", ok, err)
	}
	if objs, _ := env.Warehouse.List(ctx, "bronze/", ""); len(objs) != 0 {
		t.Fatalf("the failed first run left %d objects", len(objs))
	}
	putFile(t, landing, "sales/1.csv", "id,qty\nA,1\n")
	runStage(t, stage, env)
	tbl, _ := latest(t, env, sales)
	h, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Operation != "CREATE TABLE" || h[1].Lineage.Attempt != 1 {
		t.Fatalf("history %+v, want the CREATE TABLE and the load of the second run", h)
	}
	// A later failure keeps the table.
	putFile(t, landing, "sales/2.csv", "id,qty\nB,not a number\n")
	if _, err := stage.Run(ctx, env); err == nil {
		t.Fatal("a bad file loaded")
	}
	if tableVersion(t, env, sales) != 1 {
		t.Fatal("a failed run changed the table")
	}
	// An empty table created by another run is not this run's to remove.
	other := &Table{Name: "bronze.other", Path: "bronze/other", Schema: sales.Schema}
	env.Tables[other.Name] = other
	env.Lineage.RunID = "run-0"
	if _, err := env.openOrCreate(ctx, other); err != nil {
		t.Fatal(err)
	}
	if removed, err := delta.RemoveUnusedCreate(ctx, env.Warehouse, other.Path, delta.Lineage{Pipeline: "test", Stage: "stage", RunID: "run-1", Attempt: 1}); err != nil || removed {
		t.Fatalf("another run's empty table removed (%v, %v)", removed, err)
	}
}
