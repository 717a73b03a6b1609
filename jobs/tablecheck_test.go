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
		{"type, nullability, identity", func(d *Table) {
			d.Schema.Fields[0].Nullable = true
			d.Schema.Fields[2].Type = &delta.DecimalType{Precision: 12, Scale: 2}
			d.Schema.Fields[3].Metadata = map[string]any{}
		}, []string{
			"table s.t: column id: NOT NULL in the table, nullable in the pipeline; to converge, declare it as it is: {name: id, type: bigint, nullable: false}",
			`table s.t: column amount: decimal(10,2) in the table, decimal(12,2) in the pipeline; to converge, declare it as it is: {name: amount, type: "decimal(10,2)", nullable: true}`,
			"table s.t: column sk: identity (start 1, step 1) in the table, no identity in the pipeline; to converge, declare it as it is: {name: sk, type: bigint, nullable: true, identity: {start: 1, step: 1}}",
		}},
		{"columns missing on either side", func(d *Table) {
			d.Schema.Fields = append(d.Schema.Fields[:2], &delta.StructField{Name: "extra", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true})
		}, []string{
			"table s.t: column extra is declared, but the table has no such column; to converge, remove it from the declaration (orchestrator adds no columns to an existing table)",
			"table s.t: column amount (decimal(10,2)) is in the table but not declared; to converge, declare it: {name: amount, type: \"decimal(10,2)\", nullable: true}",
			"table s.t: column sk (bigint) is in the table but not declared; to converge, declare it: {name: sk, type: bigint, nullable: true, identity: {start: 1, step: 1}}",
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
			for _, diff := range CheckTable(d, snap, "p.yaml") {
				got = append(got, diff.String())
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("differences:\n%s", diff(got, c.want))
			}
		})
	}
}
