package jobs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
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
