package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// DiffOptions control Diff.
type DiffOptions struct {
	// Keys name the columns that identify a row in both versions (case-insensitive).
	// Empty: the whole row is its key, so the diff has added and removed rows only.
	Keys []string
	// Filter, when set, keeps only the rows of both versions it is true for.
	Filter expr.Predicate
	// MaxRows bounds the rows read from the files that differ between the two versions
	// (default DefaultDiffMaxRows); past it Diff fails with ErrDiffTooLarge.
	MaxRows int64
	// TableURI resolves add paths that are absolute URIs (as in ScanOptions).
	TableURI string
}

// DefaultDiffMaxRows is DiffOptions.MaxRows' default.
const DefaultDiffMaxRows = 1_000_000

// ErrDiffTooLarge is wrapped by Diff when the files that differ hold more rows than
// DiffOptions.MaxRows.
var ErrDiffTooLarge = errors.New("too many rows differ to diff in memory")

// Row change kinds of a Diff.
const (
	DiffAdded   = "added"   // the key is only in the newer version
	DiffRemoved = "removed" // the key is only in the older version
	DiffChanged = "changed" // the key is in both, with other values
)

// RowDiff is one key whose rows differ: Before is its row in Diff.Before (-1 when
// added), After its row in Diff.After (-1 when removed), Changed the columns whose
// values differ (changed rows only).
type RowDiff struct {
	Kind    string
	Before  int
	After   int
	Changed []string
}

// Diff is the difference of two versions of a table by key.
type Diff struct {
	From, To int64
	Keys     []string
	// Before and After hold the rows the differences name, each read in its version's
	// schema (nil when no row of that side differs), except that a column the newer
	// version renamed is named in Before as in After. The caller releases them.
	Before, After arrow.RecordBatch
	// Rows lists the differences: removed and changed keys in the older version's file
	// order, then added ones in the newer version's.
	Rows []RowDiff
	// Added, Removed and Changed count them.
	Added, Removed, Changed int
	// AddedColumns and DroppedColumns are the columns only the newer (older) version has;
	// the others are compared.
	AddedColumns, DroppedColumns []string
	// RenamedColumns are the columns the older version has under another name (the
	// same column mapping id), as {older name, newer name}; Before names them as the
	// newer version does.
	RenamedColumns [][2]string
	// FilesRead and RowsRead say what was read: only the files live in one version and
	// not the other (a file in both holds the same rows in both).
	FilesRead int
	RowsRead  int64
}

// Release frees the rows.
func (d *Diff) Release() {
	for _, r := range []arrow.RecordBatch{d.Before, d.After} {
		if r != nil {
			r.Release()
		}
	}
}

// DiffVersions compares version from with version to of the table by key: the rows
// whose key only one of them has, and, for a key both have, the columns whose values
// differ. Each version is read in its own schema; a column is the same column in both
// when it has the same column mapping id (a renamed column is compared under its newer
// name), else the same name, and a widened column's older values are compared widened. It reads only the data files that are live in one version and not the other
// (with their deletion vectors), so a diff of two neighbouring versions costs what their
// commits wrote. A key held by several rows of one version pairs them in file order.
func (t *Table) DiffVersions(ctx context.Context, from, to int64, opts DiffOptions) (*Diff, error) {
	d, err := t.diffVersions(ctx, from, to, opts)
	if err != nil {
		return nil, fmt.Errorf("diff of table %s versions %d and %d: %w", t.displayRoot(), from, to, err)
	}
	return d, nil
}

func (t *Table) diffVersions(ctx context.Context, from, to int64, opts DiffOptions) (*Diff, error) {
	if opts.MaxRows <= 0 {
		opts.MaxRows = DefaultDiffMaxRows
	}
	a, err := t.SnapshotAt(ctx, from)
	if err != nil {
		return nil, err
	}
	b, err := t.SnapshotAt(ctx, to)
	if err != nil {
		return nil, err
	}
	d := &Diff{From: from, To: to}
	renames := renamedColumns(a.Schema(), b.Schema())
	d.RenamedColumns = renames
	keys, err := diffKeys(b.Schema(), opts.Keys)
	if err != nil {
		return nil, err
	}
	if _, err := diffKeys(a.Schema(), renamedBack(keys, renames)); err != nil {
		return nil, err
	}
	d.Keys = keys
	aOnly, bOnly := filesApart(a.Files(), b.Files())
	d.FilesRead = len(aOnly) + len(bOnly)
	read, err := readAll(ctx, a, aOnly, opts, &d.RowsRead)
	if err != nil {
		return nil, err
	}
	before := renameRecordColumns(read, renames)
	read.Release()
	defer before.Release()
	after, err := readAll(ctx, b, bOnly, opts, &d.RowsRead)
	if err != nil {
		return nil, err
	}
	defer after.Release()
	// The older rows as the newer version types them, for comparing; shown as read.
	cmp := castLike(before, after)
	defer cmp.Release()

	cols := comparedColumns(cmp, after, d)
	matched, added, err := matchByKey(cmp, after, keys)
	if err != nil {
		return nil, err
	}
	pickB, pickA := d.classify(cols, matched, added)
	if d.Before, err = arrowx.Gather(ctx, memory.DefaultAllocator, before, pickB); err != nil {
		return nil, err
	}
	if d.After, err = arrowx.Gather(ctx, memory.DefaultAllocator, after, pickA); err != nil {
		d.Release()
		return nil, err
	}
	return d, nil
}

// matchByKey pairs the rows of before and after by their keys, in order (the first row
// of a key before with the first after, and so on): matched is per row of before its
// row after (-1: none), added the rows after no row before pairs with.
func matchByKey(before, after arrow.RecordBatch, keys []string) (matched, added []int, err error) {
	keyIdx := func(rec arrow.RecordBatch) []int {
		idx := make([]int, len(keys))
		for i, k := range keys {
			idx[i] = fieldIndex(rec.Schema(), k)
		}
		return idx
	}
	encB, err := newRowEncoder(before, keyIdx(before))
	if err != nil {
		return nil, nil, err
	}
	encA, err := newRowEncoder(after, keyIdx(after))
	if err != nil {
		return nil, nil, err
	}
	byKey := map[string][]int{}
	for i := range int(before.NumRows()) {
		k := string(encB.encode(nil, i))
		byKey[k] = append(byKey[k], i)
	}
	matched = make([]int, before.NumRows())
	for i := range matched {
		matched[i] = -1
	}
	for j := range int(after.NumRows()) {
		k := string(encA.encode(nil, j))
		rows := byKey[k]
		if len(rows) == 0 {
			added = append(added, j)
			continue
		}
		i := rows[0]
		byKey[k] = rows[1:]
		matched[i] = j
	}
	return matched, added, nil
}

// classify adds to d a row diff per removed row, per pair whose compared columns
// differ (cols), then per added row, and counts them; pickB and pickA are the rows of
// before and after they show, in d.Rows' order.
func (d *Diff) classify(cols *columnPairs, matched, added []int) (pickB, pickA []int32) {
	for i, j := range matched {
		switch {
		case j < 0:
			d.Rows = append(d.Rows, RowDiff{Kind: DiffRemoved, Before: len(pickB), After: -1})
			pickB = append(pickB, int32(i))
			d.Removed++
		default:
			changed := cols.differ(i, j)
			if len(changed) == 0 {
				continue
			}
			d.Rows = append(d.Rows, RowDiff{Kind: DiffChanged, Before: len(pickB), After: len(pickA), Changed: changed})
			pickB, pickA = append(pickB, int32(i)), append(pickA, int32(j))
			d.Changed++
		}
	}
	for _, j := range added {
		d.Rows = append(d.Rows, RowDiff{Kind: DiffAdded, Before: -1, After: len(pickA)})
		pickA = append(pickA, int32(j))
		d.Added++
	}
	return pickB, pickA
}

// diffKeys checks the key columns against a schema, in its spelling.
func diffKeys(st *StructType, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	for i, k := range keys {
		f := st.Field(k)
		if f == nil {
			return nil, fmt.Errorf("key column %q is not in both versions", k)
		}
		out[i] = f.Name
	}
	return out, nil
}

// renamedColumns are the top-level columns of old that new has under another name
// (matched as DiffSchemas matches them), {old name, new name}.
func renamedColumns(old, new *StructType) [][2]string {
	var out [][2]string
	for i, j := range matchFields(old, new) {
		if j >= 0 && old.Fields[j].Name != new.Fields[i].Name {
			out = append(out, [2]string{old.Fields[j].Name, new.Fields[i].Name})
		}
	}
	return out
}

// renamedBack names columns (newer names) as the older version does.
func renamedBack(cols []string, renames [][2]string) []string {
	out := slices.Clone(cols)
	for i, c := range out {
		for _, r := range renames {
			if strings.EqualFold(r[1], c) {
				out[i] = r[0]
			}
		}
	}
	return out
}

// renameRecordColumns is rec with its columns renamed {old, new} (retained: release it).
func renameRecordColumns(rec arrow.RecordBatch, renames [][2]string) arrow.RecordBatch {
	if len(renames) == 0 {
		rec.Retain()
		return rec
	}
	fields := slices.Clone(rec.Schema().Fields())
	for i, f := range fields {
		for _, r := range renames {
			if f.Name == r[0] {
				fields[i].Name = r[1]
			}
		}
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), rec.Columns(), rec.NumRows())
}

// castLike is before with each column that after has in another type (a widened
// column) cast to after's type, so that equal values compare equal; a column that does
// not cast is kept as it is (its values then differ). Release it.
func castLike(before, after arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, before.NumCols())
	fields := slices.Clone(before.Schema().Fields())
	for i, f := range fields {
		cols[i] = before.Column(i)
		cols[i].Retain()
		j := fieldIndex(after.Schema(), f.Name)
		if j < 0 || arrow.TypeEqual(f.Type, after.Schema().Field(j).Type) {
			continue
		}
		if c, err := dschema.Cast(memory.DefaultAllocator, cols[i], after.Schema().Field(j).Type); err == nil {
			cols[i].Release()
			cols[i], fields[i].Type = c, c.DataType()
		}
	}
	md := before.Schema().Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, before.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// filesApart returns the files live in only one of two file lists, by path and
// deletion vector.
func filesApart(a, b []*Add) (aOnly, bOnly []*Add) {
	id := func(f *Add) string { return f.Path + "\x00" + f.DeletionVector.UniqueID() }
	inA := make(map[string]bool, len(a))
	for _, f := range a {
		inA[id(f)] = true
	}
	inB := make(map[string]bool, len(b))
	for _, f := range b {
		inB[id(f)] = true
		if !inA[id(f)] {
			bOnly = append(bOnly, f)
		}
	}
	for _, f := range a {
		if !inB[id(f)] {
			aOnly = append(aOnly, f)
		}
	}
	return aOnly, bOnly
}

// readAll reads the rows of files of snap into one record, counting them into read.
func readAll(ctx context.Context, snap *Snapshot, files []*Add, opts DiffOptions, read *int64) (arrow.RecordBatch, error) {
	t := snap.Table()
	schema, err := ArrowSchema(snap.Schema())
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return array.NewRecordBatch(schema, emptyColumns(schema), 0), nil
	}
	sc, err := Scan(ctx, t.Store(), t.Root(), snap.Schema(), snap.PartitionColumns(), files, ScanOptions{Filter: opts.Filter, TableURI: opts.TableURI})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	var recs []arrow.RecordBatch
	defer func() { arrowx.ReleaseRecords(recs) }()
	for sc.Next() {
		rec := sc.RecordBatch()
		*read += rec.NumRows()
		if *read > opts.MaxRows {
			return nil, fmt.Errorf("%w: the files that differ hold more than %d rows", ErrDiffTooLarge, opts.MaxRows)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return array.NewRecordBatch(sc.Schema(), emptyColumns(sc.Schema()), 0), nil
	}
	tbl := array.NewTableFromRecords(sc.Schema(), recs)
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		c, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(sc.Schema(), cols, tbl.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

func emptyColumns(schema *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	return cols
}

func fieldIndex(s *arrow.Schema, name string) int {
	for i, f := range s.Fields() {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// columnPairs are the columns both sides have, compared value by value.
type columnPairs struct {
	names []string
	b, a  []*rowEncoder
}

func comparedColumns(before, after arrow.RecordBatch, d *Diff) *columnPairs {
	cp := &columnPairs{}
	for i, f := range after.Schema().Fields() {
		j := fieldIndex(before.Schema(), f.Name)
		if j < 0 {
			d.AddedColumns = append(d.AddedColumns, f.Name)
			continue
		}
		eb, errB := newRowEncoder(before, []int{j})
		ea, errA := newRowEncoder(after, []int{i})
		if errB != nil || errA != nil {
			continue
		}
		cp.names, cp.b, cp.a = append(cp.names, f.Name), append(cp.b, eb), append(cp.a, ea)
	}
	for _, f := range before.Schema().Fields() {
		if fieldIndex(after.Schema(), f.Name) < 0 {
			d.DroppedColumns = append(d.DroppedColumns, f.Name)
		}
	}
	return cp
}

// differ lists the columns whose values differ between before row i and after row j.
func (cp *columnPairs) differ(i, j int) []string {
	var out []string
	var bufB, bufA []byte
	for c, name := range cp.names {
		bufB = cp.b[c].encode(bufB[:0], i)
		bufA = cp.a[c].encode(bufA[:0], j)
		if string(bufB) != string(bufA) {
			out = append(out, name)
		}
	}
	return out
}

// rowEncoder encodes a row's values in some columns as bytes that are equal exactly
// when the values are (nulls included; types without a key encoding by their text).
// With no columns it encodes every column.
type rowEncoder struct {
	parts []func(buf []byte, i int) []byte
	arrs  []arrow.Array
}

func newRowEncoder(rec arrow.RecordBatch, cols []int) (*rowEncoder, error) {
	if len(cols) == 0 {
		cols = make([]int, rec.NumCols())
		for i := range cols {
			cols[i] = i
		}
	}
	e := &rowEncoder{}
	for _, c := range cols {
		if c < 0 {
			return nil, errors.New("a key column is missing")
		}
		arr := rec.Column(c)
		f, err := keyPart(arr)
		if err != nil {
			f = func(buf []byte, i int) []byte {
				s := arr.ValueStr(i)
				buf = appendUvarint(buf, uint64(len(s)))
				return append(buf, s...)
			}
		}
		e.parts, e.arrs = append(e.parts, f), append(e.arrs, arr)
	}
	return e, nil
}

func (e *rowEncoder) encode(buf []byte, i int) []byte {
	for k, f := range e.parts {
		if e.arrs[k].IsNull(i) {
			buf = append(buf, 0)
			continue
		}
		buf = append(buf, 1)
		buf = f(buf, i)
	}
	return buf
}

func appendUvarint(buf []byte, v uint64) []byte {
	for v >= 0x80 {
		buf = append(buf, byte(v)|0x80)
		v >>= 7
	}
	return append(buf, byte(v))
}
