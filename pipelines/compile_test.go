package pipelines

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const historyPipeline = `pipeline: audit
tables:
  raw.events:
    columns:
      - {name: id, type: string}
    properties:
      delta.enableChangeDataFeed: true
  audit.events:
    columns:
      - {name: id, type: string}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
stages:
  - name: history
    kind: capture_history
    source: raw.events
    target: audit.events
    retries: 1
    retry_delay: 1s
    timeout: 1m
  - name: vacuum
    kind: vacuum
    depends_on: [history]
    tables: [raw.events]
    dry_run: true
`

// TestCompileRunsStagesWithLineage compiles a pipeline, runs its graph, and checks that
// the stages ran in order and that their commits record the pipeline, stage and run.
func TestCompileRunsStagesWithLineage(t *testing.T) {
	ctx := context.Background()
	spec, err := Parse("audit.yaml", []byte(historyPipeline), Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	store := mem.New(mem.Config{})
	clock := func() time.Time { return time.Date(2026, 1, 14, 9, 0, 0, 0, time.UTC) }
	opts := delta.Options{Now: clock, UserName: "etl"}

	// Seed the source table with two rows.
	src := spec.Table("raw.events")
	tbl, err := delta.Create(ctx, store, src.Path, delta.CreateOptions{Schema: src.Schema, Properties: src.Properties}, opts)
	if err != nil {
		t.Fatal(err)
	}
	as, _ := delta.ArrowSchema(src.Schema)
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"e1", "e2"}, nil)
	rec := b.NewRecordBatch()
	snap, _ := tbl.Snapshot(ctx)
	adds, err := delta.WriteRecords(ctx, store, src.Path, src.Schema, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var done []string
	g, err := LocalGraph(spec, LocalRuntime{
		Warehouse: store,
		Delta:     opts,
		RunID:     "run-42",
		Done: func(stage string, attempt int, res jobs.Result, err error) {
			done = append(done, stage)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := g.Node("history"); !ok || n.Retries != 1 || n.Timeout != time.Minute || n.Backoff.Initial != time.Second {
		t.Errorf("history node = %+v, want retries 1, timeout 1m, backoff from 1s", n)
	}
	if _, err := dag.Run(ctx, g, dag.Options{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{"history", "vacuum"}) {
		t.Errorf("stages ran %v, want history then vacuum", done)
	}
	hist, err := delta.Open(ctx, store, "audit/events", opts)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := hist.History(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := entries[0].Lineage
	if l == nil || l.Pipeline != "audit" || l.Stage != "history" || l.RunID != "run-42" || l.Attempt != 1 {
		t.Errorf("lineage of the history commit = %+v, want audit/history/run-42/attempt 1", l)
	}
	if got := spec.Consumers(); len(got) != 1 || got[0].AppID != "capture_history:raw.events" || got[0].Stage != "history" {
		t.Errorf("Consumers = %+v", got)
	}
}

// The change feed consumers a vacuum keeps files for: capture_history stages and merges
// reading a change feed (the sales example has one of each).
func TestConsumersIncludeChangeFeedMerges(t *testing.T) {
	spec, err := Load("../examples/pipelines/sales/pipeline.yaml", Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range spec.Consumers() {
		got = append(got, c.Stage+" reads "+c.Source.Name+", progress in "+c.History.Name+" as "+c.AppID)
	}
	want := []string{
		"capture_sales_history reads bronze.sales_transactions, progress in audit.sales_transactions_history as capture_history:bronze.sales_transactions",
		"merge_customers reads staging.customers, progress in sales.customer as scd2_merge:sales.customer:staging.customers",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Consumers:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A fact_load reads its source's change feed (source_changes) and, to re-key, the change
// feed of each lookup's dimension: a vacuum keeps what it has yet to read of both.
func TestConsumersIncludeFactLoads(t *testing.T) {
	spec, err := Load("../examples/pipelines/sales-facts/pipeline.yaml", Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range spec.Consumers() {
		got = append(got, fmt.Sprintf("%s reads %s, progress in %s as %s, re-keys %v", c.Stage, c.Source.Name, c.History.Name, c.AppID, c.Rekeys))
	}
	want := []string{
		"customer_history reads bronze.customer_events, progress in sales.customer as scd2_merge:sales.customer:bronze.customer_events, re-keys false",
		"sales_facts reads bronze.sales, progress in sales.sales as fact_load:sales.sales:bronze.sales, re-keys false",
		"sales_facts reads sales.customer, progress in sales.sales as " + jobs.NewFactLoad("sales_facts", spec.Stage("sales_facts").Config.(*jobs.FactLoadConfig)).DimensionAppID("sales.customer") + ", re-keys true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Consumers:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// Without a change feed the dimension is not read as one: each run that finds it
	// changed looks every fact up again.
	spec.Table("sales.customer").Properties = nil
	for _, c := range spec.Consumers() {
		if c.Source.Name == "sales.customer" {
			t.Errorf("a consumer of sales.customer without its change feed: %+v", c)
		}
	}
	// Of a snapshot source it reads the feed when the source changed in place (and
	// the version it last loaded): a Snapshot consumer, while the source has its feed.
	cfg := spec.Stage("sales_facts").Config.(*jobs.FactLoadConfig)
	cfg.SourceChanges = false
	var snapshot []jobs.Consumer
	for _, c := range spec.Consumers() {
		if c.Source.Name == "bronze.sales" {
			snapshot = append(snapshot, c)
		}
	}
	if len(snapshot) != 1 || !snapshot[0].Snapshot || snapshot[0].Rekeys || snapshot[0].AppID != "fact_load:sales.sales:bronze.sales" {
		t.Errorf("consumers of a snapshot source: %+v, want one Snapshot consumer", snapshot)
	}
	spec.Table("bronze.sales").Properties = nil
	for _, c := range spec.Consumers() {
		if c.Source.Name == "bronze.sales" {
			t.Errorf("a consumer of a snapshot source without its change feed: %+v", c)
		}
	}
}
