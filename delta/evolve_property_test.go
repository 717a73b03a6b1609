package delta_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property test of schema evolution: random sequences of schema changes (a column
// added, an integer widened to a long, a column renamed or dropped, column mapping turned
// on) and data changes (append, upsert by MERGE, DELETE) on a table, partitioned or not,
// with or without column mapping, change data feed and deletion vectors, checkpointing
// every few commits; every version read back equals a model kept here, and so does the
// change feed of the whole range in the newest schema.
//
// ORCH_EVOLVE_SEEDS sets how many seeds run (default 48, 8 with -short or -race;
// scripts/test.sh runs 256 without -race). With
// ORCH_EVOLVE_DIR set, TestEvolutionPropertyToDir writes the table of seed
// ORCH_EVOLVE_SEED there (table/ and model.json, every version's columns and rows), for
// the interop suite to check against Spark.

// evoColumn is a column of the model: its current name and kind ("int", "long",
// "string"); the key k and the partition p are not in the list.
type evoColumn struct {
	name, kind string
	id         int // the model's own identity of the column, for the change feed
}

type evoModel struct {
	cols     []*evoColumn
	rows     map[int64]map[int]any // key → column id → value (nil: NULL)
	parts    map[int64]string      // key → partition value
	nextID   int
	mapped   bool
	versions map[int64]evoVersion
	// feed is the change feed in model terms: version, type, key, values by column id.
	feed []evoChange
}

type evoVersion struct {
	Columns []string         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
}

type evoChange struct {
	version int64
	typ     string
	key     int64
	part    string
	vals    map[int]any
}

func (m *evoModel) col(name string) *evoColumn {
	for _, c := range m.cols {
		if strings.EqualFold(c.name, name) {
			return c
		}
	}
	return nil
}

// snapshot is the model's table now, as sorted JSON rows and as an evoVersion.
func (m *evoModel) snapshot(partitioned bool) evoVersion {
	v := evoVersion{Columns: []string{"k"}}
	for _, c := range m.cols {
		v.Columns = append(v.Columns, c.name)
	}
	if partitioned {
		v.Columns = append(v.Columns, "p")
	}
	keys := make([]int64, 0, len(m.rows))
	for k := range m.rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := map[string]any{"k": k}
		for _, c := range m.cols {
			r[c.name] = m.rows[k][c.id]
		}
		if partitioned {
			r["p"] = m.parts[k]
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

func (v evoVersion) jsonRows(t testing.TB) []string {
	out := make([]string, len(v.Rows))
	for i, r := range v.Rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}

// evoRun is one seed's sequence on a table.
type evoRun struct {
	t           testing.TB
	ctx         context.Context
	rng         *rand.Rand
	tbl         *delta.Table
	m           *evoModel
	partitioned bool
	cdf         bool
	nextKey     int64
	log         []string
}

var evoNames = []string{"a", "b", "c", "d", "e", "f"}

func newEvoRun(t testing.TB, store objectstore.Store, seed uint64) *evoRun {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed*7919+1))
	r := &evoRun{t: t, ctx: ctx, rng: rng, partitioned: rng.IntN(2) == 0, cdf: rng.IntN(3) > 0,
		m: &evoModel{rows: map[int64]map[int]any{}, parts: map[int64]string{}, versions: map[int64]evoVersion{}}}
	r.m.mapped = rng.IntN(3) > 0
	r.m.cols = []*evoColumn{{name: "a", kind: "int", id: 1}, {name: "b", kind: "string", id: 2}}
	r.m.nextID = 3
	fields := []string{`{"name":"k","type":"long","nullable":false,"metadata":{}}`, fieldJSON("a", "integer"), fieldJSON("b", "string")}
	var parts []string
	if r.partitioned {
		fields = append(fields, fieldJSON("p", "string"))
		parts = []string{"p"}
	}
	sch, err := delta.ParseSchema(structOf(fields...))
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{"delta.checkpointInterval": strconv.Itoa(2 + rng.IntN(4))}
	if r.m.mapped {
		props["delta.columnMapping.mode"] = []string{"name", "id"}[rng.IntN(2)]
	}
	if r.cdf {
		props["delta.enableChangeDataFeed"] = "true"
	}
	if rng.IntN(2) == 0 {
		props["delta.enableDeletionVectors"] = "true"
	}
	r.log = append(r.log, fmt.Sprintf("create partitioned=%v %v", r.partitioned, props))
	if r.tbl, err = delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, PartitionColumns: parts, Properties: props}, delta.Options{}); err != nil {
		t.Fatal(err)
	}
	r.record(0)
	return r
}

func (r *evoRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nafter:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.log, "\n  "))
}

func (r *evoRun) record(v int64) {
	r.m.versions[v] = r.m.snapshot(r.partitioned)
}

func (r *evoRun) value(c *evoColumn) any {
	if r.rng.IntN(5) == 0 {
		return nil
	}
	switch c.kind {
	case "int":
		return int64(r.rng.IntN(2000) - 1000)
	case "long":
		return int64(r.rng.Uint64()>>1) - int64(1<<62)
	}
	return "s" + strconv.Itoa(r.rng.IntN(1000))
}

func (r *evoRun) partValue() string { return []string{"x", "y", "z"}[r.rng.IntN(3)] }

// record builds an Arrow record of rows (key → values by column id) in the table's
// current schema.
func (r *evoRun) recordOf(keys []int64, vals map[int64]map[int]any, parts map[int64]string) arrow.RecordBatch {
	snap := latest(r.t, r.tbl)
	as, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		r.fail("%v", err)
	}
	var rows []map[string]any
	for _, k := range keys {
		row := map[string]any{"k": k}
		for _, c := range r.m.cols {
			row[c.name] = vals[k][c.id]
		}
		if r.partitioned {
			row["p"] = parts[k]
		}
		rows = append(rows, row)
	}
	b, _ := json.Marshal(rows)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(string(b)))
	if err != nil {
		r.fail("record: %v", err)
	}
	return rec
}

func (r *evoRun) newRows(n int) ([]int64, map[int64]map[int]any, map[int64]string) {
	keys := make([]int64, n)
	vals, parts := map[int64]map[int]any{}, map[int64]string{}
	for i := range keys {
		r.nextKey++
		k := r.nextKey
		keys[i] = k
		vals[k] = map[int]any{}
		for _, c := range r.m.cols {
			vals[k][c.id] = r.value(c)
		}
		parts[k] = r.partValue()
	}
	return keys, vals, parts
}

func (r *evoRun) change(v int64, typ string, k int64, part string, vals map[int]any) {
	cp := map[int]any{}
	for id, x := range vals {
		cp[id] = x
	}
	r.m.feed = append(r.m.feed, evoChange{version: v, typ: typ, key: k, part: part, vals: cp})
}

func (r *evoRun) appendRows() {
	keys, vals, parts := r.newRows(1 + r.rng.IntN(4))
	rec := r.recordOf(keys, vals, parts)
	defer rec.Release()
	v, err := r.tbl.Append(r.ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}})
	if err != nil {
		r.fail("append: %v", err)
	}
	r.log = append(r.log, fmt.Sprintf("v%d append %v", v, keys))
	for _, k := range keys {
		r.m.rows[k], r.m.parts[k] = vals[k], parts[k]
		r.change(v, "insert", k, parts[k], vals[k])
	}
	r.record(v)
}

func (r *evoRun) existingKeys() []int64 {
	keys := make([]int64, 0, len(r.m.rows))
	for k := range r.m.rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// upsert MERGEs rows for some existing keys (new values, same partition) and new keys.
func (r *evoRun) upsert() {
	var keys []int64
	vals, parts := map[int64]map[int]any{}, map[int64]string{}
	for _, k := range r.existingKeys() {
		if r.rng.IntN(3) == 0 {
			keys = append(keys, k)
			vals[k] = map[int]any{}
			for _, c := range r.m.cols {
				vals[k][c.id] = r.value(c)
			}
			parts[k] = r.m.parts[k]
		}
	}
	nk, nv, np := r.newRows(r.rng.IntN(3))
	keys = append(keys, nk...)
	for _, k := range nk {
		vals[k], parts[k] = nv[k], np[k]
	}
	if len(keys) == 0 {
		return
	}
	rec := r.recordOf(keys, vals, parts)
	defer rec.Release()
	res, err := r.tbl.Merge(r.ctx, delta.MergeOptions{Source: []arrow.RecordBatch{rec}, On: []string{"k"},
		WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate}}, WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}})
	if err != nil {
		r.fail("merge: %v", err)
	}
	r.log = append(r.log, fmt.Sprintf("v%d merge %v", res.Version, keys))
	if !res.Committed {
		r.fail("merge of %v committed nothing", keys)
	}
	for _, k := range keys {
		if old, ok := r.m.rows[k]; ok { // every matched row is updated, as in Spark
			r.change(res.Version, "update_preimage", k, parts[k], old)
			r.change(res.Version, "update_postimage", k, parts[k], vals[k])
		} else {
			r.change(res.Version, "insert", k, parts[k], vals[k])
		}
		r.m.rows[k], r.m.parts[k] = vals[k], parts[k]
	}
	r.record(res.Version)
}

func (r *evoRun) deleteRows() {
	var del []any
	for _, k := range r.existingKeys() {
		if r.rng.IntN(4) == 0 {
			del = append(del, k)
		}
	}
	if len(del) == 0 {
		return
	}
	res, err := r.tbl.Delete(r.ctx, delta.DeleteOptions{Where: expr.In("k", del...)})
	if err != nil {
		r.fail("delete: %v", err)
	}
	r.log = append(r.log, fmt.Sprintf("v%d delete %v", res.Version, del))
	for _, k := range del {
		k := k.(int64)
		r.change(res.Version, "delete", k, r.m.parts[k], r.m.rows[k])
		delete(r.m.rows, k)
		delete(r.m.parts, k)
	}
	r.record(res.Version)
}

// freeName is a column name the table has not now (maybe one it had).
func (r *evoRun) freeName() string {
	var free []string
	for _, n := range evoNames {
		if r.m.col(n) == nil {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return ""
	}
	return free[r.rng.IntN(len(free))]
}

// evolve commits the declaration the model's columns make now.
func (r *evoRun) evolve(what string, opts delta.EvolutionOptions) {
	fields := []string{`{"name":"k","type":"long","nullable":false,"metadata":{}}`}
	for _, c := range r.m.cols {
		fields = append(fields, fieldJSON(c.name, map[string]string{"int": "integer", "long": "long", "string": "string"}[c.kind]))
	}
	if r.partitioned {
		fields = append(fields, fieldJSON("p", "string"))
	}
	d, err := delta.ParseSchema(structOf(fields...))
	if err != nil {
		r.fail("%v", err)
	}
	opts.KeepUndeclared = false
	ev, problems := delta.PlanEvolution(latest(r.t, r.tbl), d, opts)
	if len(problems) > 0 {
		r.fail("%s: problems %v", what, problems)
	}
	v, err := r.tbl.Evolve(r.ctx, ev, nil)
	if err != nil {
		r.fail("%s: %v", what, err)
	}
	r.log = append(r.log, fmt.Sprintf("v%d %s", v, what))
	r.record(v)
}

func (r *evoRun) schemaChange() {
	switch op := r.rng.IntN(5); {
	case op == 0 && len(r.m.cols) < 5: // add
		name := r.freeName()
		if name == "" {
			return
		}
		c := &evoColumn{name: name, kind: []string{"int", "string"}[r.rng.IntN(2)], id: r.m.nextID}
		r.m.nextID++
		r.m.cols = append(r.m.cols, c)
		for _, row := range r.m.rows {
			row[c.id] = nil
		}
		r.evolve("add "+name+" "+c.kind, delta.EvolutionOptions{})
	case op == 1: // widen
		for _, c := range r.m.cols {
			if c.kind == "int" {
				c.kind = "long"
				r.evolve("widen "+c.name, delta.EvolutionOptions{})
				return
			}
		}
	case op == 2 && r.m.mapped: // rename
		name := r.freeName()
		if name == "" {
			return
		}
		c := r.m.cols[r.rng.IntN(len(r.m.cols))]
		old := c.name
		c.name = name
		r.evolve("rename "+old+" to "+name, delta.EvolutionOptions{RenamedFrom: map[string]string{name: old}})
	case op == 3 && r.m.mapped && len(r.m.cols) > 1: // drop
		i := r.rng.IntN(len(r.m.cols))
		c := r.m.cols[i]
		r.m.cols = slices.Delete(r.m.cols, i, i+1)
		for _, row := range r.m.rows {
			delete(row, c.id)
		}
		v, err := r.tbl.DropColumns(r.ctx, latest(r.t, r.tbl), []string{c.name}, nil)
		if err != nil {
			r.fail("drop %s: %v", c.name, err)
		}
		r.log = append(r.log, fmt.Sprintf("v%d drop %s", v, c.name))
		r.record(v)
	case op == 4 && !r.m.mapped: // column mapping on
		r.m.mapped = true
		r.evolve("column mapping on", delta.EvolutionOptions{ColumnMapping: "name"})
	}
}

// run makes n random changes, then checks every version and the change feed.
func (r *evoRun) run(n int) {
	for i := 0; i < n; i++ {
		switch op := r.rng.IntN(10); {
		case op < 3:
			r.appendRows()
		case op < 5:
			r.upsert()
		case op < 6:
			r.deleteRows()
		default:
			r.schemaChange()
		}
	}
	r.check()
}

func (r *evoRun) check() {
	if os.Getenv("ORCH_EVOLVE_LOG") != "" {
		r.t.Log(strings.Join(r.log, "\n"))
	}
	snap := latest(r.t, r.tbl)
	for v := int64(0); v <= snap.Version(); v++ {
		want, ok := r.m.versions[v]
		if !ok {
			r.fail("version %d is not in the model", v)
		}
		at, err := r.tbl.SnapshotAt(r.ctx, v)
		if err != nil {
			r.fail("version %d: %v", v, err)
		}
		got := scanRows(r.t, at, delta.ScanOptions{})
		if w := want.jsonRows(r.t); !slices.Equal(got, w) {
			r.fail("version %d:\n%s\nwant:\n%s", v, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	if !r.cdf {
		return
	}
	// The whole feed in the newest schema: columns dropped since are gone, columns
	// added since are NULL in older rows, renamed ones carry their values.
	var want []string
	for _, ch := range r.m.feed {
		row := map[string]any{"k": ch.key, "_change_type": ch.typ, "_commit_version": ch.version}
		for _, c := range r.m.cols {
			row[c.name] = ch.vals[c.id]
		}
		if r.partitioned {
			row["p"] = ch.part
		}
		b, _ := json.Marshal(row)
		want = append(want, string(b))
	}
	slices.Sort(want)
	if got := feedJSON(r.t, r.tbl, 0, -1); !slices.Equal(got, want) {
		r.fail("change feed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func evoSeeds(t *testing.T) int {
	n := 48
	if testing.Short() || raceEnabled {
		n = 8
	}
	if s := os.Getenv("ORCH_EVOLVE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ORCH_EVOLVE_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	return n
}

func TestEvolutionProperty(t *testing.T) {
	for seed := 1; seed <= evoSeeds(t); seed++ {
		t.Run("seed="+strconv.Itoa(seed), func(t *testing.T) {
			t.Parallel()
			newEvoRun(t, mem.New(mem.Config{}), uint64(seed)).run(30)
		})
	}
}

// TestEvolutionPropertyToDir writes one seed's table and model for the interop suite
// (test_schema_evolution.py runs it); without ORCH_EVOLVE_DIR it checks that seed on a
// local directory, as the suite's table is made.
func TestEvolutionPropertyToDir(t *testing.T) {
	dir := os.Getenv("ORCH_EVOLVE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	seed := uint64(3)
	if s := os.Getenv("ORCH_EVOLVE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ORCH_EVOLVE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	store, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := newEvoRun(t, store, seed)
	r.run(30)
	versions := map[string]evoVersion{}
	for v, m := range r.m.versions {
		versions[strconv.FormatInt(v, 10)] = m
	}
	b, err := json.MarshalIndent(map[string]any{"seed": seed, "log": r.log, "versions": versions}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
