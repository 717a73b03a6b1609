package web

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// TestSchemaTimeline: a table whose schema changed (column mapping turned on, a column
// renamed and one added, a value updated, the added column dropped) shows each change
// on the schema tab and its API with the run or user that made it, each version's own
// columns; the change feed is split where the schema changed, each part in its own
// schema; the diff compares the renamed column with itself; the rows of an older
// version say how the schema changed since.
func TestSchemaTimeline(t *testing.T) {
	e := newEnv(t, envOptions{})
	first, _ := e.twoRuns()
	ctx := context.Background()
	store, err := fs.New(fs.Config{Dir: filepath.Join(e.dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tbl, err := delta.Open(ctx, store, e.specs["shop"].Table("raw.customers").Path, delta.Options{UserName: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tbl.SetProperties(ctx, map[string]string{delta.PropColumnMappingMode: "name"}, nil); err != nil || v != 3 {
		t.Fatalf("column mapping on: v%d, %v", v, err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	decl, err := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"customer_id","type":"string","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"town","type":"string","nullable":true,"metadata":{}},
 {"name":"source_file","type":"string","nullable":true,"metadata":{}},
 {"name":"load_timestamp","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"tier","type":"string","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	ev, problems := delta.PlanEvolution(snap, decl, delta.EvolutionOptions{RenamedFrom: map[string]string{"town": "city"}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if v, err := tbl.Evolve(ctx, ev, &delta.Lineage{Pipeline: "shop", Stage: "load", RunID: first.ID, Attempt: 1}); err != nil || v != 4 {
		t.Fatalf("evolve: v%d, %v", v, err)
	}
	if res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("customer_id", "C-3"), Set: map[string]any{"town": "Nice"}}); err != nil || res.Version != 5 {
		t.Fatalf("update: %+v, %v", res, err)
	}
	// Read once before the drop: the page reads then only the commits since.
	var sr schemaResult
	if e.getJSON("/api/v1/tables/raw.customers/schema", &sr); len(sr.History) != 3 || sr.Version != 5 {
		t.Fatalf("schema history at v%d: %d entries, want 3", sr.Version, len(sr.History))
	}
	snap, _ = tbl.Snapshot(ctx)
	if v, err := tbl.DropColumns(ctx, snap, []string{"tier"}, nil); err != nil || v != 6 {
		t.Fatalf("drop: v%d, %v", v, err)
	}

	sr = schemaResult{}
	e.getJSON("/api/v1/tables/raw.customers/schema", &sr)
	var got []string
	for _, h := range sr.History {
		line := h.Operation
		for _, c := range h.Changes {
			line += "; " + c.Text
		}
		if h.Run != "" {
			line += " [" + h.Run + "]"
		} else if h.User != "" {
			line += " [by " + h.User + "]"
		}
		got = append(got, line)
	}
	want := []string{
		"CREATE TABLE [" + first.ID + "]",
		"SET TBLPROPERTIES; column mapping turned on (name) [by ana]",
		"CHANGE COLUMNS; renamed city to town; added tier (string) [" + first.ID + "]",
		"DROP COLUMNS; dropped tier [by ana]",
	}
	if !slices.Equal(got, want) || sr.Version != 6 || sr.ColumnMapping != "name" {
		t.Fatalf("schema history at v%d (%s):\n  %s\nwant:\n  %s", sr.Version, sr.ColumnMapping, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if len(sr.Columns) != 5 || sr.Columns[2].Name != "town" || sr.Columns[2].PhysicalName != "city" || sr.Columns[2].ID == 0 {
		t.Errorf("latest columns: %+v; want town, physical name city, with an id", sr.Columns)
	}
	var old schemaResult
	e.getJSON("/api/v1/tables/raw.customers/schema?version=2", &old)
	if old.Version != 2 || old.ColumnMapping != "none" || len(old.Columns) != 5 || old.Columns[2].Name != "city" || old.Columns[2].PhysicalName != "" {
		t.Errorf("v2's columns: %+v", old)
	}
	_, page := e.do(req{path: "/tables/raw.customers/schema?version=4"})
	for _, w := range []string{`<span class="tag sc-renamed">renamed city to town</span>`, `<span class="tag sc-dropped">dropped tier</span>`,
		`<li class="on" data-version="4">`, "Columns at v4", "<code>tier</code>", "outside a run"} {
		if !strings.Contains(page, w) {
			t.Errorf("schema page lacks %q", w)
		}
	}

	var ch changesResult
	e.getJSON("/api/v1/tables/raw.customers/changes?from=2&to=5", &ch)
	var parts []string
	for _, p := range ch.Parts {
		var cols []string
		for _, c := range p.Columns {
			if !strings.HasPrefix(c.Name, "_") && c.Name != "source_file" && c.Name != "load_timestamp" {
				cols = append(cols, c.Name)
			}
		}
		var changes []string
		for _, c := range p.SchemaChanges {
			changes = append(changes, c.Text)
		}
		parts = append(parts, strings.Join(cols, ",")+" v"+strings.Join([]string{itoa(p.From), itoa(p.To)}, "-v")+" "+itoa(int64(len(p.Rows)))+" rows "+strings.Join(changes, "; "))
	}
	wantParts := []string{
		"customer_id,name,city v2-v2 3 rows ",
		"customer_id,name,city v3-v3 0 rows column mapping turned on (name)",
		"customer_id,name,town,tier v4-v5 2 rows renamed city to town; added tier (string)",
	}
	if !slices.Equal(parts, wantParts) {
		t.Errorf("change feed parts:\n  %s\nwant:\n  %s", strings.Join(parts, "\n  "), strings.Join(wantParts, "\n  "))
	}
	if last := ch.Parts[len(ch.Parts)-1]; len(last.Rows) == 2 && (last.Rows[1][2].Text != "Nice" || last.Rows[0][2].Text != "Lyon") {
		t.Errorf("v5's update of town: %v", last.Rows)
	}
	_, page = e.do(req{path: "/tables/raw.customers/changes?from=2&to=5"})
	if !strings.Contains(page, "each part below shows its versions") || strings.Count(page, `<table class="list data changes">`) != 2 {
		t.Error("changes page: the parts are not shown each with its columns")
	}

	var d diffResult
	e.getJSON("/api/v1/tables/raw.customers/diff?from=2&to=5", &d)
	if d.Changed != 1 || d.Added != 0 || d.Removed != 0 || len(d.Rows) != 1 || !slices.Equal(d.Rows[0].Changed, []string{"town"}) ||
		len(d.ColumnsRenamed) != 1 || d.ColumnsRenamed[0] != (renamedColumn{From: "city", To: "town"}) || !slices.Equal(d.ColumnsAdded, []string{"tier"}) {
		t.Errorf("diff v2 to v5: %+v; want C-3's town changed, city renamed to town, tier added", d)
	}
	if r := d.Rows[0]; len(r.Before) > 2 && (r.Before[2].Text != "Lyon" || r.After[2].Text != "Nice") {
		t.Errorf("diff row: before %v, after %v", r.Before, r.After)
	}

	var rows rowsResult
	e.getJSON("/api/v1/tables/raw.customers/rows?version=2", &rows)
	if rows.Columns[2].Name != "city" || !slices.Contains(rows.SchemaChangedSince, "renamed city to town") {
		t.Errorf("rows of v2: columns %v, schema changed since %v", rows.Columns, rows.SchemaChangedSince)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
