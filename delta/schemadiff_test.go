package delta_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// col is a schemaString field: name, type JSON, nullable, and metadata JSON ("" none).
func col(name, typ string, nullable bool, md string) string {
	if md == "" {
		md = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"type":%s,"nullable":%v,"metadata":%s}`, name, typ, nullable, md)
}

// mapped is the column mapping metadata of id and physical name.
func mapped(id int, phys string) string {
	return fmt.Sprintf(`{"delta.columnMapping.id":%d,"delta.columnMapping.physicalName":%q}`, id, phys)
}

func structOf(fields ...string) string {
	return `{"type":"struct","fields":[` + strings.Join(fields, ",") + `]}`
}

// TestDiffSchemas: columns are known by their column mapping id, not their name: a
// renamed column is a rename (nested ones too), a column dropped and added again under
// its name is a drop and an add; without ids, by name. Widenings, other type changes,
// nullability and comments are named; an identity's high-water mark and column mapping
// being turned on (ids assigned, names kept) change no column.
func TestDiffSchemas(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{
			name: "rename by id",
			old:  structOf(col("id", `"long"`, false, mapped(1, "col-a")), col("cust_name", `"string"`, true, mapped(2, "col-b"))),
			new:  structOf(col("id", `"long"`, false, mapped(1, "col-a")), col("customer_name", `"string"`, true, mapped(2, "col-b"))),
			want: []string{"renamed cust_name to customer_name"},
		},
		{
			name: "renamed twice over, names swapped",
			old:  structOf(col("a", `"integer"`, true, mapped(1, "p1")), col("b", `"integer"`, true, mapped(2, "p2"))),
			new:  structOf(col("b", `"integer"`, true, mapped(1, "p1")), col("a", `"integer"`, true, mapped(2, "p2"))),
			want: []string{"renamed a to b", "renamed b to a"},
		},
		{
			name: "dropped and added again under its name",
			old:  structOf(col("id", `"long"`, false, mapped(1, "p1")), col("channel", `"string"`, true, mapped(2, "p2"))),
			new:  structOf(col("id", `"long"`, false, mapped(1, "p1")), col("channel", `"string"`, true, mapped(3, "p3"))),
			want: []string{"added channel (string)", "dropped channel"},
		},
		{
			name: "without column mapping, by name",
			old:  structOf(col("id", `"integer"`, false, ""), col("name", `"string"`, true, ""), col("gone", `"string"`, true, "")),
			new:  structOf(col("ID", `"long"`, true, ""), col("name", `"integer"`, true, `{"comment":"the name"}`), col("channel", `"string"`, true, "")),
			want: []string{"renamed id to ID", "widened ID from integer to long", "ID made nullable",
				"changed the type of name from string to integer", `commented name: "the name"`, "added channel (string)", "dropped gone"},
		},
		{
			name: "nested fields",
			old:  structOf(col("st", structOf(col("a", `"integer"`, true, mapped(2, "p2")), col("x", `"date"`, true, mapped(3, "p3"))), true, mapped(1, "p1"))),
			new: structOf(col("st", structOf(col("aa", `"integer"`, true, mapped(2, "p2")), col("x", `"timestamp_ntz"`, true, mapped(3, "p3")),
				col("b", `"string"`, true, mapped(5, "p5"))), true, mapped(1, "p1"))),
			want: []string{"renamed st.a to st.aa", "widened st.x from date to timestamp_ntz", "added st.b (string)"},
		},
		{
			name: "array of structs",
			old:  structOf(col("items", `{"type":"array","elementType":`+structOf(col("sku", `"string"`, true, ""))+`,"containsNull":true}`, true, "")),
			new:  structOf(col("items", `{"type":"array","elementType":`+structOf(col("sku", `"string"`, true, ""), col("qty", `"short"`, true, ""))+`,"containsNull":true}`, true, "")),
			want: []string{"added items.element.qty (short)"},
		},
		{
			name: "column mapping turned on, an identity's high-water mark moved",
			old:  structOf(col("sk", `"long"`, false, `{"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":4}`), col("name", `"string"`, true, "")),
			new: structOf(col("sk", `"long"`, false, `{"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":9,"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"sk"}`),
				col("name", `"string"`, true, mapped(2, "name"))),
			want: nil,
		},
		{
			name: "column mapping turned on and a column renamed in one commit",
			old:  structOf(col("id", `"long"`, false, ""), col("city", `"string"`, true, "")),
			new:  structOf(col("id", `"long"`, false, mapped(1, "id")), col("town", `"string"`, true, mapped(2, "city"))),
			want: []string{"renamed city to town"},
		},
		{
			name: "NOT NULL added, a decimal widened, a comment removed",
			old:  structOf(col("a", `"string"`, true, `{"comment":"old"}`), col("amount", `"decimal(10,2)"`, true, "")),
			new:  structOf(col("a", `"string"`, false, ""), col("amount", `"decimal(14,2)"`, true, "")),
			want: []string{"a made NOT NULL", "removed the comment of a", "widened amount from decimal(10,2) to decimal(14,2)"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			old, err := delta.ParseSchema(c.old)
			if err != nil {
				t.Fatal(err)
			}
			new, err := delta.ParseSchema(c.new)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range delta.DiffSchemas(old, new) {
				got = append(got, ch.String())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("changes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestSchemaHistory: a table created, written, then evolved by a run (a column added
// and one widened), renamed, its channel dropped and a new channel added, lists each
// schema change at its version with the run that made it; writes and property changes
// are not schema changes.
func TestSchemaHistory(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, err := delta.ParseSchema(structOf(col("id", `"integer"`, false, ""), col("name", `"string"`, true, ""), col("channel", `"string"`, true, "")))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch,
		Properties: map[string]string{"delta.columnMapping.mode": "name"}}, delta.Options{UserName: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	appendJSON(t, tbl, snap, `[{"id":1,"name":"a","channel":"web"}]`) // v1
	evolve := func(decl string, opts delta.EvolutionOptions, lineage *delta.Lineage) int64 {
		t.Helper()
		d, err := delta.ParseSchema(decl)
		if err != nil {
			t.Fatal(err)
		}
		snap, _ := tbl.Snapshot(ctx)
		ev, problems := delta.PlanEvolution(snap, d, opts)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		v, err := tbl.Evolve(ctx, ev, lineage)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	run := &delta.Lineage{Pipeline: "sales", Stage: "ingest", RunID: "r-7", Attempt: 1}
	v2 := evolve(structOf(col("id", `"long"`, false, ""), col("name", `"string"`, true, ""), col("channel", `"string"`, true, ""), col("region", `"string"`, true, "")), delta.EvolutionOptions{}, run)
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.logRetentionDuration": "interval 60 days"}, nil); err != nil { // v3
		t.Fatal(err)
	}
	v4 := evolve(structOf(col("id", `"long"`, false, ""), col("full_name", `"string"`, true, ""), col("channel", `"string"`, true, ""), col("region", `"string"`, true, "")),
		delta.EvolutionOptions{RenamedFrom: map[string]string{"full_name": "name"}}, run)
	snap, _ = tbl.Snapshot(ctx)
	v5, err := tbl.DropColumns(ctx, snap, []string{"channel"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v6 := evolve(structOf(col("id", `"long"`, false, ""), col("full_name", `"string"`, true, ""), col("region", `"string"`, true, ""), col("channel", `"string"`, true, "")), delta.EvolutionOptions{}, nil)
	snap, _ = tbl.Snapshot(ctx)
	appendJSON(t, tbl, snap, `[{"id":2,"full_name":"b","region":"eu","channel":"shop"}]`)

	hist, err := tbl.SchemaHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hist {
		line := fmt.Sprintf("v%d %s", h.Version, h.Operation)
		if h.First {
			line += " first"
		}
		for _, c := range h.Changes {
			line += "; " + c.String()
		}
		if h.Lineage != nil {
			line += " [run " + h.Lineage.RunID + "]"
		}
		got = append(got, line)
	}
	want := []string{
		"v0 CREATE TABLE first",
		fmt.Sprintf("v%d CHANGE COLUMNS; widened id from integer to long; added region (string) [run r-7]", v2),
		fmt.Sprintf("v%d RENAME COLUMN; renamed name to full_name [run r-7]", v4),
		fmt.Sprintf("v%d DROP COLUMNS; dropped channel", v5),
		fmt.Sprintf("v%d ADD COLUMNS; added channel (string)", v6),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("schema history:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	between, err := tbl.SchemaHistoryBetween(ctx, 3, v5)
	if err != nil {
		t.Fatal(err)
	}
	if len(between) != 3 || !between[0].First || between[0].Version != 3 || between[0].Schema.Field("region") == nil ||
		between[1].Version != v4 || between[2].Version != v5 || between[2].Changes[0].String() != "dropped channel" {
		t.Errorf("schema history from v3 to v%d: %+v", v5, between)
	}
	if cols := delta.DescribeSchema(hist[0].Schema, nil); len(cols) != 3 || cols[2].Path != "channel" || cols[2].ID != 3 || cols[2].PhysicalName == "" {
		t.Errorf("version 0's columns: %+v", cols)
	}
	last := delta.DescribeSchema(hist[len(hist)-1].Schema, nil)
	if len(last) != 4 || last[0].Path != "id" || last[0].Type != "long" || len(last[0].TypeChanges) != 1 || last[0].TypeChanges[0] != (delta.TypeChange{From: "integer", To: "long"}) ||
		last[3].Path != "channel" || last[3].ID != 5 {
		t.Errorf("latest columns: %+v", last)
	}
	if hist[0].UserName != "ana" || !hist[1].Timestamp.After(hist[0].Timestamp) && !hist[1].Timestamp.Equal(hist[0].Timestamp) {
		t.Errorf("first entry %+v", hist[0])
	}
}

// TestDiffVersionsAcrossSchemaChanges: a diff of two versions reads each in its own
// schema and compares a column with itself: renamed (column mapping id), widened to a
// decimal of another scale and from an integer to a double; only the value that
// changed is reported.
func TestDiffVersionsAcrossSchemaChanges(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, err := delta.ParseSchema(structOf(col("id", `"integer"`, false, ""), col("name", `"string"`, true, ""),
		col("amount", `"decimal(10,2)"`, true, ""), col("qty", `"integer"`, true, "")))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch,
		Properties: map[string]string{"delta.columnMapping.mode": "name"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	appendJSON(t, tbl, snap, `[{"id":1,"name":"a","amount":"1.50","qty":3},{"id":2,"name":"b","amount":"2.25","qty":null},{"id":3,"name":"c","amount":null,"qty":7}]`)
	decl, err := delta.ParseSchema(structOf(col("id", `"integer"`, false, ""), col("full_name", `"string"`, true, ""),
		col("amount", `"decimal(12,4)"`, true, ""), col("qty", `"double"`, true, "")))
	if err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	ev, problems := delta.PlanEvolution(snap, decl, delta.EvolutionOptions{RenamedFrom: map[string]string{"full_name": "name"}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if _, err := tbl.Evolve(ctx, ev, nil); err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", int32(2)), Set: map[string]any{"full_name": "B"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tbl.DiffVersions(ctx, 1, res.Version, delta.DiffOptions{Keys: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if d.Changed != 1 || d.Added != 0 || d.Removed != 0 || len(d.Rows) != 1 || !slices.Equal(d.Rows[0].Changed, []string{"full_name"}) {
		t.Fatalf("diff: %d changed, %d added, %d removed, rows %+v; want the one row whose full_name changed", d.Changed, d.Added, d.Removed, d.Rows)
	}
	if len(d.AddedColumns)+len(d.DroppedColumns) > 0 || !slices.Equal(d.RenamedColumns, [][2]string{{"name", "full_name"}}) {
		t.Errorf("columns added %v, dropped %v, renamed %v; want only name renamed to full_name", d.AddedColumns, d.DroppedColumns, d.RenamedColumns)
	}
	before, after := d.Before.Schema(), d.After.Schema()
	bi, ai := before.FieldIndices("full_name"), after.FieldIndices("full_name")
	if len(bi) != 1 || len(ai) != 1 {
		t.Fatalf("before %v, after %v: want full_name in both", before, after)
	}
	if got := d.Before.Column(bi[0]).ValueStr(d.Rows[0].Before) + " → " + d.After.Column(ai[0]).ValueStr(d.Rows[0].After); got != "b → B" {
		t.Errorf("full_name %s, want b → B", got)
	}
	if f, _ := before.FieldsByName("amount"); len(f) != 1 || f[0].Type.String() != "decimal(10, 2)" {
		t.Errorf("before's amount %v: want it read as version 1 has it, decimal(10,2)", f)
	}
}

// TestPlanDropColumns: what a drop refuses, naming the column and the way out.
func TestPlanDropColumns(t *testing.T) {
	ctx := context.Background()
	create := func(props map[string]string, parts []string, fields ...string) *delta.Snapshot {
		t.Helper()
		sch, err := delta.ParseSchema(structOf(fields...))
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "t", delta.CreateOptions{Schema: sch, PartitionColumns: parts, Properties: props}, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	on := map[string]string{"delta.columnMapping.mode": "name"}
	mappedSnap := create(on, []string{"day"}, col("day", `"date"`, true, ""), col("id", `"long"`, true, ""), col("st", structOf(col("a", `"integer"`, true, "")), true, ""))
	for _, c := range []struct {
		name string
		snap *delta.Snapshot
		cols []string
		want string
	}{
		{"no column mapping", create(nil, nil, col("a", `"long"`, true, ""), col("b", `"long"`, true, "")), []string{"b"},
			"dropping a column needs column mapping, which the table does not have (its files name their columns by their names): set delta.columnMapping.mode: name first"},
		{"partition column", mappedSnap, []string{"DAY"}, "column day is a partition column"},
		{"the last data column", mappedSnap, []string{"id", "st"}, "dropping id, st would leave the table without a data column"},
		{"a nested field", mappedSnap, []string{"st.a"}, "no column st.a: only top-level columns can be dropped"},
		{"twice", mappedSnap, []string{"id", "ID"}, "column ID is named twice"},
		{"unknown", mappedSnap, []string{"nope"}, "no column nope (the table has day, id, st)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := delta.PlanDropColumns(c.snap, c.cols)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	st, err := delta.PlanDropColumns(mappedSnap, []string{"St"})
	if err != nil || len(st.Fields) != 2 || st.Fields[1].Name != "id" {
		t.Errorf("drop st: %v, %v", st, err)
	}
}

// TestRenamesByID: a column renamed in the commit that turned column mapping on is a
// rename (it kept its name as its physical name); without column mapping, no rename.
func TestRenamesByID(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, new string
		want     map[string]string
	}{
		{"by id", structOf(col("a", `"long"`, true, mapped(1, "p1")), col("b", `"long"`, true, mapped(2, "p2"))),
			structOf(col("a", `"long"`, true, mapped(1, "p1")), col("c", `"long"`, true, mapped(2, "p2"))), map[string]string{"b": "c"}},
		{"column mapping turned on with the rename", structOf(col("id", `"long"`, true, ""), col("amount", `"long"`, true, "")),
			structOf(col("id", `"long"`, true, mapped(1, "id")), col("total", `"long"`, true, mapped(2, "amount"))), map[string]string{"amount": "total"}},
		{"no column mapping", structOf(col("id", `"long"`, true, ""), col("amount", `"long"`, true, "")),
			structOf(col("id", `"long"`, true, ""), col("total", `"long"`, true, "")), map[string]string{}},
		{"dropped and added again", structOf(col("x", `"long"`, true, mapped(1, "p1"))), structOf(col("x", `"long"`, true, mapped(2, "p2"))), map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			old, err := delta.ParseSchema(c.old)
			if err != nil {
				t.Fatal(err)
			}
			new, err := delta.ParseSchema(c.new)
			if err != nil {
				t.Fatal(err)
			}
			if got := delta.RenamesByID(old, new); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}
