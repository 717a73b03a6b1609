package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Schema evolution: the metadata-only changes that turn a table's schema into a declared
// one without rewriting a file, each named as Spark's ALTER TABLE names it in the
// history. Safe, and made by PlanEvolution and Evolve:
//   - ADD COLUMNS: a nullable column, at the top level or inside a struct (older files
//     read it as NULL);
//   - CHANGE COLUMN: a type widened as typeWidening allows (CanWiden; the table takes
//     the feature and the field records the change), or NOT NULL dropped;
//   - RENAME COLUMN: a column declared with the name it had before (column mapping:
//     only the logical name changes).
//
// Everything else (a narrower or another type, NOT NULL on a nullable column, a column
// the declaration lacks, a new NOT NULL column, a partition column's type) is a
// SchemaProblem naming the column and the way to do it. DropColumns removes columns on
// request (column mapping: their data stays in the files, unread).

// The operations of a schema evolution, as Spark names them.
const (
	OpAddColumns   = "ADD COLUMNS"
	OpChangeColumn = "CHANGE COLUMN"
	OpRenameColumn = "RENAME COLUMN"
	OpDropColumns  = "DROP COLUMNS"
)

// SchemaStep is one change of an evolution.
type SchemaStep struct {
	Op     string // OpAddColumns, OpChangeColumn, OpRenameColumn, OpDropColumns
	Column string // the column's dotted path (its new name)
	Detail string // e.g. "bigint", "integer to long", "from cust_name", "nullable"
}

func (s SchemaStep) String() string { return s.Op + " " + s.Column + " (" + s.Detail + ")" }

// SchemaProblem is a declared change that no metadata-only commit makes.
type SchemaProblem struct {
	Column string // dotted path
	What   string // e.g. "long in the table, integer declared: a narrower type"
	How    string // what to do instead
}

func (p SchemaProblem) String() string { return "column " + p.Column + ": " + p.What + "; " + p.How }

// EvolutionOptions say how PlanEvolution reads a declaration.
type EvolutionOptions struct {
	// RenamedFrom maps a declared column (dotted path, its new name) to the name it had
	// (its last element), for renames.
	RenamedFrom map[string]string
	// KeepUndeclared keeps nullable columns the declaration lacks (a table whose stage
	// adds the columns its source gains) rather than reporting them.
	KeepUndeclared bool
	// ColumnMapping, "name", turns column mapping on for a table without it, in the same
	// commit (as ALTER TABLE SET TBLPROPERTIES does: the columns keep their names as
	// physical names); "" or the table's own mode changes nothing.
	ColumnMapping string
}

// Evolution is the metadata-only commit that turns a snapshot's schema into a declared
// one: its steps (none: the schema is as declared) and what it commits.
type Evolution struct {
	Steps  []SchemaStep
	read   *Snapshot
	schema *StructType
	widen  bool // a type changes: the table needs typeWidening
	mapOn  bool // column mapping is turned on
}

// PlanEvolution compares a declared schema with snap's: the evolution that converges
// them, and the declared changes it cannot make (then nothing should be committed).
func PlanEvolution(snap *Snapshot, declared *StructType, opts EvolutionOptions) (*Evolution, []SchemaProblem) {
	ev := &Evolution{read: snap}
	p := &evolver{ev: ev, opts: opts, mapped: columnMappingMode(snap.Metadata()) != "none",
		parts: snap.PartitionColumns()}
	st, err := cloneSchema(snap.Schema())
	if err != nil {
		return ev, []SchemaProblem{{Column: "*", What: err.Error(), How: "fix the table's schema"}}
	}
	switch mode := strings.ToLower(opts.ColumnMapping); {
	case mode == "" || mode == columnMappingMode(snap.Metadata()):
	case mode == "name" && !p.mapped:
		assignColumnMapping(st, maxColumnID(snap.Metadata(), st), true)
		p.mapped, ev.mapOn = true, true
		p.step("SET TBLPROPERTIES", propColumnMappingMode, "name")
	default:
		p.problem("*", fmt.Sprintf("%s is %s in the table, %s declared", propColumnMappingMode, columnMappingMode(snap.Metadata()), mode),
			"declare it as the table has it (column mapping can be turned on, as name, but not changed or off)")
	}
	ev.schema = p.structs("", st, declared)
	if len(p.problems) > 0 || len(ev.Steps) == 0 {
		ev.Steps = nil
	}
	return ev, p.problems
}

type evolver struct {
	ev       *Evolution
	opts     EvolutionOptions
	mapped   bool
	parts    []string
	problems []SchemaProblem
}

func (p *evolver) problem(col, what, how string, args ...any) {
	p.problems = append(p.problems, SchemaProblem{Column: col, What: what, How: fmt.Sprintf(how, args...)})
}

func (p *evolver) step(op, col, detail string) {
	p.ev.Steps = append(p.ev.Steps, SchemaStep{Op: op, Column: col, Detail: detail})
}

// structs evolves struct have (the table's, a copy it may change) into want.
func (p *evolver) structs(prefix string, have, want *StructType) *StructType {
	used := make([]bool, len(have.Fields))
	out := &StructType{Fields: slices.Clone(have.Fields)}
	var added []*StructField
	for _, d := range want.Fields {
		path := prefix + d.Name
		i := have.FieldIndex(d.Name)
		if i < 0 && p.opts.KeepUndeclared {
			i = formerlyNamed(have, d.Name) // a follower's column renamed since it was declared
		}
		if old, ok := p.opts.RenamedFrom[path]; ok && i < 0 {
			if i = have.FieldIndex(old); i < 0 {
				p.problem(path, fmt.Sprintf("declared renamed_from %s, but the table has no column %s", old, prefix+old), "remove renamed_from (the rename is done) or name the column it had")
				continue
			}
			if !p.mapped {
				p.problem(path, "a rename needs column mapping (renaming rewrites no file then)", "declare delta.columnMapping.mode: name in the table's properties")
				continue
			}
			p.step(OpRenameColumn, path, "from "+prefix+have.Fields[i].Name)
		}
		if i < 0 {
			if !d.Nullable {
				p.problem(path, "a new NOT NULL column (the table's rows have no value for it)", "declare it nullable: true")
				continue
			}
			nf := &StructField{Name: d.Name, Type: d.Type, Nullable: true, Metadata: copyMetadata(d.Metadata)}
			nf.Metadata[metaColumnAddedAt] = int64(0) // the commit's time, set by Evolve
			added = append(added, nf)
			p.step(OpAddColumns, path, d.Type.String())
			continue
		}
		if used[i] {
			p.problem(path, "declared twice (once by renamed_from)", "declare each column once")
			continue
		}
		used[i] = true
		f := p.field(prefix, have.Fields[i], d)
		out.Fields[i] = f
	}
	for i, f := range have.Fields {
		if used[i] || p.opts.KeepUndeclared && f.Nullable {
			continue
		}
		how := "declare it, or drop it with: orchestrator table alter TABLE --drop-column " + prefix + f.Name
		if !p.mapped {
			how = "declare it (dropping a column needs column mapping: delta.columnMapping.mode: name)"
		}
		p.problem(prefix+f.Name, "is in the table but not declared", "%s", how)
	}
	out.Fields = append(out.Fields, added...)
	return out
}

// field evolves table field f into declared field d (same column).
func (p *evolver) field(prefix string, f, d *StructField) *StructField {
	path := prefix + d.Name
	nf := *f
	switch {
	case strings.EqualFold(f.Name, d.Name):
		nf.Name = d.Name
	case p.opts.RenamedFrom[path] != "":
		nf.Metadata = copyMetadata(f.Metadata)
		nf.Metadata[metaFormerNames] = append(formerNames(f), f.Name)
		nf.Name = d.Name
	}
	switch {
	case f.Nullable && !d.Nullable:
		p.problem(path, "nullable in the table, NOT NULL declared (its rows may hold NULLs)", "declare it nullable: true")
	case !f.Nullable && d.Nullable:
		nf.Nullable = true
		p.step(OpChangeColumn, path, "nullable")
	}
	if IsIdentity(f) != IsIdentity(d) {
		p.problem(path, "identity differs between the table and the declaration", "declare it with the table's identity")
	}
	switch ht := f.Type.(type) {
	case *StructType:
		if wt, ok := d.Type.(*StructType); ok {
			nf.Type = p.structs(path+".", ht, wt)
			return &nf
		}
	case *ArrayType:
		if wt, ok := d.Type.(*ArrayType); ok {
			if hs, ok := ht.ElementType.(*StructType); ok {
				if ws, ok := wt.ElementType.(*StructType); ok {
					nf.Type = &ArrayType{ElementType: p.structs(path+".element.", hs, ws), ContainsNull: ht.ContainsNull}
					return &nf
				}
			}
		}
	}
	if f.Type.String() == d.Type.String() {
		return &nf
	}
	isPart := slices.ContainsFunc(p.parts, func(c string) bool { return prefix == "" && strings.EqualFold(c, f.Name) })
	switch {
	case isPart:
		p.problem(path, fmt.Sprintf("%s in the table, %s declared: a partition column's type cannot change", f.Type, d.Type), "declare it as %s", f.Type)
	case p.opts.KeepUndeclared && CanWiden(d.Type, f.Type):
		// A follower's column widened since it was declared: the table's type stays.
	case CanWiden(f.Type, d.Type):
		recordTypeChange(&nf, f.Type, d.Type)
		nf.Type = d.Type
		p.ev.widen = true
		p.step(OpChangeColumn, path, f.Type.String()+" to "+d.Type.String())
	default:
		p.problem(path, fmt.Sprintf("%s in the table, %s declared: not a widening Delta makes without rewriting the table", f.Type, d.Type),
			"declare it as %s (widenings: byte, short, integer, long each to a wider one; float to double; integers to double or a decimal with their digits; a decimal to more digits; date to timestamp_ntz)", f.Type)
	}
	return &nf
}

// metaColumnAddedAt, in a column's metadata, is when an evolution added the column to
// the table (Unix milliseconds): files written before it may lack it.
const metaColumnAddedAt = "orchestrator.addedAt"

// metaFormerNames, in a column's metadata, lists the names an evolution renamed it from,
// oldest first.
const metaFormerNames = "orchestrator.formerNames"

func formerNames(f *StructField) []any {
	names, _ := f.Metadata[metaFormerNames].([]any)
	return slices.Clone(names)
}

// formerlyNamed is the index of the column of st that was once called name (-1: none).
func formerlyNamed(st *StructType, name string) int {
	for i, f := range st.Fields {
		for _, n := range formerNames(f) {
			if s, ok := n.(string); ok && strings.EqualFold(s, name) {
				return i
			}
		}
	}
	return -1
}

// stampAdded sets the time of the columns an evolution adds (their placeholder 0).
func stampAdded(st *StructType, ms int64) {
	for _, f := range st.Fields {
		if v, ok := f.Metadata[metaColumnAddedAt]; ok {
			if n, err := metaInt(v); err == nil && n == 0 {
				f.Metadata[metaColumnAddedAt] = ms
			}
		}
		switch t := f.Type.(type) {
		case *StructType:
			stampAdded(t, ms)
		case *ArrayType:
			if e, ok := t.ElementType.(*StructType); ok {
				stampAdded(e, ms)
			}
		}
	}
}

// ColumnAddedAt is when an evolution (Table.Evolve) added top-level column f to its
// table; false for a column the table was created with or another writer added.
func ColumnAddedAt(f *StructField) (time.Time, bool) {
	ms, err := metaInt(f.Metadata[metaColumnAddedAt])
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

func copyMetadata(md map[string]any) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}

// Schema is the schema the evolution commits.
func (ev *Evolution) Schema() *StructType { return ev.schema }

// Evolve commits ev (nothing without steps) in one metadata-only commit with lineage,
// and returns its version (-1 when nothing was committed). The operation is the steps'
// when they are of one kind, else CHANGE COLUMNS; the parameters list every step. A
// concurrent commit conflicts (the caller plans again on the new version).
func (t *Table) Evolve(ctx context.Context, ev *Evolution, lineage *Lineage) (int64, error) {
	if len(ev.Steps) == 0 {
		return -1, nil
	}
	snap := ev.read
	md := *snap.Metadata()
	md.Configuration = copyConfig(md.Configuration)
	st, err := cloneSchema(ev.schema)
	if err != nil {
		return -1, err
	}
	stampAdded(st, t.opts.Now().UnixMilli())
	proto := snap.Protocol()
	if ev.mapOn {
		md.Configuration[propColumnMappingMode] = "name"
		proto = withColumnMapping(proto)
	}
	if columnMappingMode(&md) != "none" {
		maxID := assignColumnMapping(st, maxColumnID(&md, st), false)
		md.Configuration[propColumnMappingMaxID] = fmt.Sprint(maxID)
	}
	if ev.widen && !proto.HasWriterFeature(FeatureTypeWidening) && !proto.HasWriterFeature(FeatureTypeWideningPreview) {
		proto = withReaderWriterFeature(proto, FeatureTypeWidening)
	}
	if hasTimestampNTZ(st) && !proto.HasWriterFeature(FeatureTimestampNTZ) {
		// A timestamp_ntz column added or widened to (from a date).
		proto = withReaderWriterFeature(proto, FeatureTimestampNTZ)
	}
	if md.SchemaString, err = st.SchemaString(); err != nil {
		return -1, err
	}
	op := ev.Steps[0].Op
	for _, s := range ev.Steps {
		if s.Op != op {
			op = "CHANGE COLUMNS"
		}
	}
	steps := make([]map[string]string, len(ev.Steps))
	for i, s := range ev.Steps {
		steps[i] = map[string]string{"operation": s.Op, "column": s.Column, "change": s.Detail}
	}
	b, _ := json.Marshal(steps)
	tx := t.NewTransaction(snap, TxOptions{Operation: op, OperationParameters: map[string]any{"columns": string(b)}, Lineage: lineage})
	tx.UpdateMetadata(&md)
	if proto != snap.Protocol() {
		tx.UpdateProtocol(proto)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		return -1, fmt.Errorf("evolve the schema of table %s: %w", t.displayRoot(), err)
	}
	return v, nil
}

// SchemaVersions lists the versions in (start, end] whose commit changed the table's
// metadata (its schema, among others): a change feed read across one sees every version
// in the schema of its end.
func (t *Table) SchemaVersions(ctx context.Context, start, end int64) ([]int64, error) {
	var out []int64
	if start >= end {
		return nil, nil
	}
	err := t.forEachCommit(ctx, start+1, end, func(v int64, acts []Action) error {
		for i := range acts {
			if acts[i].MetaData != nil {
				out = append(out, v)
				break
			}
		}
		return nil
	})
	return out, err
}

// RenamesByID maps the top-level columns of older that newer has under another name
// (older name -> newer name), matched as DiffSchemas matches them: by column-mapping id,
// or, for a column of a table that turned column mapping on (in the same commit as the
// rename, too), by the physical name it kept. Nothing for schemas without column
// mapping, whose columns cannot be renamed.
func RenamesByID(older, newer *StructType) map[string]string {
	out := map[string]string{}
	for _, r := range renamedColumns(older, newer) {
		out[r[0]] = r[1]
	}
	return out
}

// ColumnMappingMode is the table's delta.columnMapping.mode: "none", "name" or "id".
func (s *Snapshot) ColumnMappingMode() string { return columnMappingMode(s.Metadata()) }

// PlanDropColumns checks that snap's table can drop the top-level columns (each named
// once, case-insensitively) in one metadata-only commit, and returns the schema it would
// have then. Refused, naming the column and what to do: a table without column mapping
// (dropping would have to rewrite every file, or a later column of the name would read
// the old values), a column the table lacks, a partition column, the last data column.
func PlanDropColumns(snap *Snapshot, columns []string) (*StructType, error) {
	if len(columns) == 0 {
		return nil, errors.New("no column to drop")
	}
	if columnMappingMode(snap.Metadata()) == "none" {
		return nil, fmt.Errorf("dropping a column needs column mapping, which the table does not have (its files name their columns by their names): set %s: name first (declare it in the table's properties, or run orchestrator table properties TABLE --set %s=name), then drop", propColumnMappingMode, propColumnMappingMode)
	}
	st, err := cloneSchema(snap.Schema())
	if err != nil {
		return nil, err
	}
	for _, c := range columns {
		i := st.FieldIndex(c)
		if i < 0 {
			if strings.Contains(c, ".") && snap.Schema().FieldIndex(c) < 0 {
				return nil, fmt.Errorf("no column %s: only top-level columns can be dropped", c)
			}
			if snap.Schema().FieldIndex(c) >= 0 {
				return nil, fmt.Errorf("column %s is named twice", c)
			}
			return nil, fmt.Errorf("no column %s (the table has %s)", c, fieldNames(snap.Schema()))
		}
		if slices.ContainsFunc(snap.PartitionColumns(), func(p string) bool { return strings.EqualFold(p, c) }) {
			return nil, fmt.Errorf("column %s is a partition column: dropping it would change where every row lives (rewrite the table instead)", st.Fields[i].Name)
		}
		st.Fields = slices.Delete(st.Fields, i, i+1)
	}
	if len(st.Fields) == len(snap.PartitionColumns()) {
		return nil, fmt.Errorf("dropping %s would leave the table without a data column", strings.Join(columns, ", "))
	}
	return st, nil
}

func fieldNames(st *StructType) string {
	names := make([]string, len(st.Fields))
	for i, f := range st.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// DropColumns removes top-level columns from the schema in one metadata-only commit
// (DROP COLUMNS), as PlanDropColumns allows: with column mapping only, so that no file
// is rewritten (the values stay in the files, unread) and a later column of the same
// name is another column.
func (t *Table) DropColumns(ctx context.Context, snap *Snapshot, columns []string, lineage *Lineage) (int64, error) {
	st, err := PlanDropColumns(snap, columns)
	if err != nil {
		return -1, fmt.Errorf("drop columns of table %s: %w", t.displayRoot(), err)
	}
	md := *snap.Metadata()
	if md.SchemaString, err = st.SchemaString(); err != nil {
		return -1, err
	}
	b, _ := json.Marshal(columns)
	tx := t.NewTransaction(snap, TxOptions{Operation: OpDropColumns, OperationParameters: map[string]any{"columns": string(b)}, Lineage: lineage})
	tx.UpdateMetadata(&md)
	v, err := tx.Commit(ctx)
	if err != nil {
		return -1, fmt.Errorf("drop columns of table %s: %w", t.displayRoot(), err)
	}
	return v, nil
}

func copyConfig(c map[string]string) map[string]string {
	out := make(map[string]string, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// NonAdditiveChanges lists the versions from+1 through to whose commits renamed,
// dropped or retyped a column (widened or otherwise), each with those changes only
// (SchemaHistoryBetween's), oldest first. Spark's table_changes refuses a range with any
// of them (DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE or _DATA_SCHEMA); ours reads it, matching
// columns by their ids and widening older files. Columns added, NOT NULL dropped and
// column mapping turned on are not listed.
func (t *Table) NonAdditiveChanges(ctx context.Context, from, to int64) ([]SchemaVersion, error) {
	if to <= from {
		return nil, nil
	}
	hist, err := t.SchemaHistoryBetween(ctx, from, to)
	if err != nil {
		return nil, err
	}
	var out []SchemaVersion
	for _, sv := range hist {
		if sv.First || sv.Version <= from {
			continue
		}
		var kept []SchemaChange
		for _, c := range sv.Changes {
			switch c.Kind {
			case ColumnDropped, ColumnRenamed, ColumnWidened, ColumnRetyped:
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			sv.Changes = kept
			out = append(out, sv)
		}
	}
	return out, nil
}
