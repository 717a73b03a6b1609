package jobs

import (
	"context"
	"slices"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// Each kind of difference between a declaration and the table that exists is named,
// with what converges it; equivalent spellings of a property are no difference.
func TestCheckTable(t *testing.T) {
	existing := func() *Table {
		s := schemaOf(t, "id bigint", "day date", "amount decimal(10,2)", "sk bigint")
		s.Fields[0].Nullable = false
		s.Fields[3].Metadata = map[string]any{"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": false}
		return &Table{Name: "s.t", Path: "s/t", Schema: s, PartitionBy: []string{"day"},
			Properties: map[string]string{"delta.deletedFileRetentionDuration": "interval 7 days", "delta.enableChangeDataFeed": "true"}}
	}
	ctx := context.Background()
	st := mem.New(mem.Config{})
	e := existing()
	tbl, err := delta.Create(ctx, st, e.Path, delta.CreateOptions{Schema: e.Schema, PartitionColumns: e.PartitionBy, Properties: e.Properties}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(d *Table)
		want   []string
	}{
		{"as created", func(*Table) {}, nil},
		{"equivalent property spellings and defaults", func(d *Table) {
			d.Properties = map[string]string{"delta.deletedFileRetentionDuration": "interval 1 week", "delta.enableChangeDataFeed": "TRUE",
				"delta.appendOnly": "false", "delta.checkpointInterval": "10"}
		}, nil},
		{"a property differs", func(d *Table) { d.Properties["delta.deletedFileRetentionDuration"] = "interval 30 days" }, []string{
			`table s.t: property delta.deletedFileRetentionDuration is "interval 7 days" in the table, "interval 30 days" in the pipeline; to converge, run orchestrator table properties s.t --pipeline p.yaml --set 'delta.deletedFileRetentionDuration=interval 30 days', or declare delta.deletedFileRetentionDuration: interval 7 days`}},
		{"a property the table lacks", func(d *Table) { d.Properties["delta.appendOnly"] = "true" }, []string{
			`table s.t: property delta.appendOnly is not set in the table, "true" in the pipeline; to converge, run orchestrator table properties s.t --pipeline p.yaml --set delta.appendOnly=true, or remove it from the declaration`}},
		{"a type widened and NOT NULL dropped converge; identity does not", func(d *Table) {
			d.Schema.Fields[0].Nullable = true
			d.Schema.Fields[2].Type = &delta.DecimalType{Precision: 12, Scale: 2}
			d.Schema.Fields[3].Metadata = map[string]any{}
		}, []string{
			"table s.t: column sk: identity differs between the table and the declaration; to converge, declare it with the table's identity (the table has {name: sk, type: bigint, nullable: true, identity: {start: 1, step: 1}})",
		}},
		{"a narrower type, NOT NULL added, an undeclared column", func(d *Table) {
			d.Schema.Fields[2].Type = &delta.DecimalType{Precision: 8, Scale: 2}
			d.Schema.Fields[1].Nullable = false
			d.Schema.Fields = d.Schema.Fields[:3]
		}, []string{
			"table s.t: column day: nullable in the table, NOT NULL declared (its rows may hold NULLs); to converge, declare it nullable: true (the table has {name: day, type: date, nullable: true})",
			"table s.t: column amount: decimal(10,2) in the table, decimal(8,2) declared: not a widening Delta makes without rewriting the table; to converge, declare it as decimal(10,2) (widenings: byte, short, integer, long each to a wider one; float to double; integers to double or a decimal with their digits; a decimal to more digits; date to timestamp_ntz)",
			"table s.t: column sk: is in the table but not declared; to converge, declare it (dropping a column needs column mapping: delta.columnMapping.mode: name) (the table has {name: sk, type: bigint, nullable: true, identity: {start: 1, step: 1}})",
		}},
		{"a new nullable column converges; a new NOT NULL one does not", func(d *Table) {
			d.Schema.Fields = append(d.Schema.Fields, &delta.StructField{Name: "extra", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
				&delta.StructField{Name: "must", Type: &delta.PrimitiveType{Name: delta.TypeString}})
		}, []string{
			"table s.t: column must: a new NOT NULL column (the table's rows have no value for it); to converge, declare it nullable: true",
		}},
		{"a rename without column mapping", func(d *Table) {
			d.Schema.Fields[2].Name = "total"
			d.RenamedFrom = map[string]string{"total": "amount"}
		}, []string{
			"table s.t: column total: a rename needs column mapping (renaming rewrites no file then); to converge, declare delta.columnMapping.mode: name in the table's properties",
			"table s.t: column amount: is in the table but not declared; to converge, declare it (dropping a column needs column mapping: delta.columnMapping.mode: name) (the table has {name: amount, type: \"decimal(10,2)\", nullable: true})",
		}},
		{"nullable extra columns of a table a stage widens", func(d *Table) {
			d.Schema.Fields = d.Schema.Fields[:2]
			d.SchemaEvolution = true
		}, nil},
		{"partitioning", func(d *Table) { d.PartitionBy = nil }, []string{
			"table s.t: partitioned by day in the table, by nothing in the pipeline; to converge, declare partition_by: [day] (a table's partitioning cannot change)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := existing()
			c.change(d)
			var got []string
			_, diffs := CheckTable(d, snap, "p.yaml")
			for _, diff := range diffs {
				got = append(got, diff.String())
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("differences:\n%s", diff(got, c.want))
			}
		})
	}
}

// The safe changes of a declaration converge in one metadata-only commit, with the
// run's lineage and Spark's operation names, when a stage opens the table; a second
// open finds nothing to do; with column mapping declared, a rename converges too.
func TestDeclaredChangesConverge(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	decl := &Table{Name: "s.t", Path: "s/t", Schema: schemaOf(t, "id int", "name string")}
	env := newTestEnv(st, &testClock{t: t0}, decl)
	if _, err := env.openOrCreate(ctx, decl); err != nil {
		t.Fatal(err)
	}
	decl.Schema = schemaOf(t, "id bigint", "full_name string", "channel string")
	decl.RenamedFrom = map[string]string{"full_name": "name"}
	decl.Properties = map[string]string{"delta.columnMapping.mode": "name"}
	tbl, err := env.openDeclared(ctx, decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Schema().String(); got != "struct<id:long,full_name:string,channel:string>" {
		t.Fatalf("schema %s", got)
	}
	h, err := tbl.History(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Version != 1 || h[0].Operation != "CHANGE COLUMNS" || h[0].Lineage == nil || h[0].Lineage.RunID != "run-1" {
		t.Fatalf("history %+v, want version 1, CHANGE COLUMNS with the run's lineage", h[0])
	}
	if _, err := env.openDeclared(ctx, decl); err != nil {
		t.Fatal(err)
	}
	if snap, _ = tbl.Snapshot(ctx); snap.Version() != 1 {
		t.Fatalf("a second open committed version %d", snap.Version())
	}
}
