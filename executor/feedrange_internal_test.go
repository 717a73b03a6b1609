package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A capture or merge whose change feed range crosses a rename, a drop or a widening of
// the source is refused on Spark, naming the change and the way out (engine: local),
// before any statement is sent: Spark's table_changes refuses such a range. A range
// after the change, or one with columns added only, goes on.
func TestSparkRefusesFeedAcrossRename(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"name","type":"string","nullable":true,"metadata":{}}]}`)
	tbl, err := delta.Create(ctx, store, "src", delta.CreateOptions{Schema: sch,
		Properties: map[string]string{"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendRow := func(col string) {
		t.Helper()
		as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: col, Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(`[{"id":1,"`+col+`":"x"}]`))
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	appendRow("name") // v1
	snap, _ := tbl.Snapshot(ctx)
	decl, _ := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"full_name","type":"string","nullable":true,"metadata":{}}]}`)
	ev, problems := delta.PlanEvolution(snap, decl, delta.EvolutionOptions{RenamedFrom: map[string]string{"full_name": "name"}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if _, err := tbl.Evolve(ctx, ev, nil); err != nil { // v2
		t.Fatal(err)
	}
	appendRow("full_name") // v3
	env := &jobs.Env{Warehouse: store}
	src := jobs.PlanTable{Name: "staging.customers", Path: "src"}
	for _, tc := range []struct {
		name    string
		plan    *jobs.Plan
		refusal string
	}{
		{"capture across the rename", &jobs.Plan{Capture: &jobs.CapturePlan{Source: src, From: 1, Through: 3}},
			"the change feed of staging.customers versions 1..3 crosses renamed name to full_name at version 2"},
		{"capture after it", &jobs.Plan{Capture: &jobs.CapturePlan{Source: src, From: 2, Through: 3}}, ""},
		{"merge of the feed across it", &jobs.Plan{Merge: &jobs.MergePlan{Source: src, SourceChanges: true, From: 3, Through: 3, PriorFrom: 1}},
			"versions 1..3 crosses renamed name to full_name"},
		{"merge of a snapshot", &jobs.Plan{Merge: &jobs.MergePlan{Source: src, From: 1, Through: 3, PriorFrom: -1}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFeedRanges(ctx, tc.plan, env)
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal) || !strings.Contains(err.Error(), "engine: local")):
				t.Fatalf("got %v, want a refusal with %q and the way out", err, tc.refusal)
			}
		})
	}
}
