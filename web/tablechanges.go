package web

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// changeTypes are the change feed's row kinds, in the order the pages show them.
var changeTypes = []string{delta.ChangeInsert, delta.ChangeUpdatePreimage, delta.ChangeUpdatePostimage, delta.ChangeDelete}

const changeTypeColumn = "_change_type"

// versionCounts is what one version changed, by change type.
type versionCounts struct {
	Version   int64            `json:"version"`
	Timestamp time.Time        `json:"timestamp"`
	Counts    map[string]int64 `json:"counts"`
}

// changesResult is a table's change feed between two versions.
type changesResult struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Parts split the range where the table's schema changed: each part's rows are read
	// in the schema of its versions (a renamed column under its name then, a dropped one
	// still there). One part when the schema did not change within the range.
	Parts []changesPart `json:"parts"`
	// Counts cover the whole range, also past the limit: counted from the rows when the
	// page read them all, else taken from each commit's operation metrics
	// (CountsFromMetrics; a version whose commit has none has no counts). The page
	// reads only the rows it shows.
	Counts            []versionCounts `json:"counts"`
	CountsFromMetrics bool            `json:"counts_from_metrics,omitempty"`
	Truncated         bool            `json:"truncated"`
}

// changesPart is the change feed of versions From to To, which share one schema.
type changesPart struct {
	From    int64     `json:"from"`
	To      int64     `json:"to"`
	Columns []colType `json:"columns"`
	Rows    [][]cell  `json:"rows"`
	// Types are the rows' change types, in order (the pages colour rows by them).
	Types []string `json:"-"`
	// Operation and SchemaChanges say how version From changed the schema (none for the
	// first part).
	Operation     string             `json:"operation,omitempty"`
	SchemaChanges []schemaChangeView `json:"schema_changes,omitempty"`
}

// Rows counts the rows of every part.
func (r *changesResult) Rows() int {
	n := 0
	for _, p := range r.Parts {
		n += len(p.Rows)
	}
	return n
}

type changesQuery struct {
	from, to         *int64
	fromTime, toTime time.Time
	types, columns   []string
	limit            int
}

func (s *Server) parseChangesQuery(q url.Values) (*changesQuery, error) {
	cq := &changesQuery{}
	var err error
	for _, p := range []struct {
		key string
		v   **int64
		t   *time.Time
	}{{"from", &cq.from, &cq.fromTime}, {"to", &cq.to, &cq.toTime}} {
		raw := q.Get(p.key)
		if raw == "" {
			continue
		}
		if *p.v, err = optVersion(q, p.key); err == nil {
			continue
		}
		if *p.t, err = parseTime(raw); err != nil {
			return nil, badRequestf("%s %q: want a version number or a time (2026-01-14T10:00:00Z)", p.key, raw)
		}
	}
	cq.types = splitList(q["types"])
	for _, ct := range cq.types {
		if !slices.Contains(changeTypes, ct) {
			return nil, badRequestf("types: unknown change type %q: want insert, delete, update_preimage or update_postimage", ct)
		}
	}
	cq.columns = splitList(q["columns"])
	if cq.limit, err = s.parseLimit(q, defaultPageRows); err != nil {
		return nil, err
	}
	return cq, nil
}

// defaultChangeVersions is how many versions the change feed shows when no start is given.
const defaultChangeVersions = 10

func (s *Server) changes(ctx context.Context, ref *tableRef, cq *changesQuery) (*changesResult, error) {
	t, err := s.mustOpen(ctx, ref)
	if err != nil {
		return nil, err
	}
	opts := delta.ChangesOptions{StartVersion: cq.from, EndVersion: cq.to, StartTime: cq.fromTime, EndTime: cq.toTime,
		Types: cq.types, Columns: cq.columns, TableURI: tableURI(ref)}
	if cq.from == nil && cq.fromTime.IsZero() {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		from := max(snap.Version()-defaultChangeVersions+1, 0)
		if start, err := t.ChangeDataFeedStart(ctx); err == nil && start > from {
			from = start
		}
		opts.StartVersion = &from
	}
	rdr, err := t.Changes(ctx, opts)
	if err != nil {
		return nil, badRequestf("%v", err)
	}
	res := &changesResult{From: rdr.StartVersion(), To: rdr.EndVersion(), Counts: []versionCounts{}}
	// Each version is read in its own schema: the range is split where the schema changed.
	var schemas []delta.SchemaVersion
	if res.From < res.To {
		if schemas, err = t.SchemaHistoryBetween(ctx, res.From, res.To); err != nil {
			rdr.Release()
			return nil, err
		}
	}
	counts := map[int64]*versionCounts{}
	if len(schemas) <= 1 {
		err = readChanges(rdr, res, changesPart{From: res.From, To: res.To}, counts, cq.limit)
		rdr.Release()
		if err != nil {
			return nil, err
		}
	} else {
		rdr.Release()
		for i, sv := range schemas {
			part := changesPart{From: sv.Version, To: res.To}
			if i+1 < len(schemas) {
				part.To = schemas[i+1].Version - 1
			}
			if !sv.First {
				part.Operation = sv.Operation
				part.SchemaChanges = schemaChangeViews(sv.Changes)
			}
			if res.Truncated || part.To < part.From {
				continue
			}
			po := opts
			po.StartVersion, po.EndVersion, po.StartTime, po.EndTime = &part.From, &part.To, time.Time{}, time.Time{}
			po.Columns = columnsIn(cq.columns, sv.Schema)
			prdr, err := t.Changes(ctx, po)
			if err != nil {
				return nil, badRequestf("%v", err)
			}
			err = readChanges(prdr, res, part, counts, cq.limit)
			prdr.Release()
			if err != nil {
				return nil, err
			}
		}
	}
	if res.Truncated {
		counts, err = countsFromMetrics(ctx, t, res.From, res.To)
		if err != nil {
			return nil, err
		}
		res.CountsFromMetrics = true
	}
	for _, vc := range counts {
		res.Counts = append(res.Counts, *vc)
	}
	slices.SortFunc(res.Counts, func(a, b versionCounts) int { return int(a.Version - b.Version) })
	return res, nil
}

// columnsIn keeps the asked-for columns that schema has (all of them when none is
// asked for, or none of them is in it).
func columnsIn(cols []string, schema *delta.StructType) []string {
	var out []string
	for _, c := range cols {
		if f := schema.Field(c); f != nil {
			out = append(out, f.Name)
		}
	}
	return out
}

// readChanges reads a reader's rows into a new part of res (up to the limit of rows
// of the whole result; then res is Truncated) and counts them by version and type.
func readChanges(rdr *delta.ChangesReader, res *changesResult, part changesPart, counts map[int64]*versionCounts, limit int) error {
	part.Columns, part.Rows = columnsOf(rdr.Schema(), nil), [][]cell{}
	fields := rdr.Schema().Fields()
	typeCol := slices.IndexFunc(fields, func(f arrow.Field) bool { return f.Name == changeTypeColumn })
	verCol := slices.IndexFunc(fields, func(f arrow.Field) bool { return f.Name == delta.CommitVersionColumn })
	tsCol := slices.IndexFunc(fields, func(f arrow.Field) bool { return f.Name == delta.CommitTimestampColumn })
	shown := res.Rows()
	defer func() { res.Parts = append(res.Parts, part) }()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		types, _ := rec.Column(typeCol).(*array.String)
		versions, _ := rec.Column(verCol).(*array.Int64)
		for r := range int(rec.NumRows()) {
			ct := ""
			if types != nil && types.IsValid(r) {
				ct = types.Value(r)
			}
			if versions != nil {
				v := versions.Value(r)
				vc := counts[v]
				if vc == nil {
					vc = &versionCounts{Version: v, Counts: map[string]int64{}}
					if tsCol >= 0 {
						if ts, err := time.Parse(rowtext.TimestampLayout, rowtext.At(rec.Column(tsCol), r).Text); err == nil {
							vc.Timestamp = ts
						}
					}
					counts[v] = vc
				}
				vc.Counts[ct]++
			}
			if shown == limit {
				res.Truncated = true // one row past the page: the rest is not read
				return nil
			}
			part.Rows = append(part.Rows, rowCells(rec, r, len(part.Columns)))
			part.Types = append(part.Types, ct)
			shown++
		}
	}
	return rdr.Err()
}

// countsFromMetrics counts the changes of versions from..to by type from their commits'
// operation metrics (rows inserted, updated, deleted), reading the log only. A version
// whose commit has no such metrics has no counts.
func countsFromMetrics(ctx context.Context, t *delta.Table, from, to int64) (map[int64]*versionCounts, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	hist, err := t.History(ctx, int(snap.Version()-from+1))
	if err != nil {
		return nil, err
	}
	out := map[int64]*versionCounts{}
	for _, h := range hist {
		if h.Version < from || h.Version > to {
			continue
		}
		ins, upd, del, ok := h.RowCounts()
		if !ok {
			continue
		}
		out[h.Version] = &versionCounts{Version: h.Version, Timestamp: h.Timestamp, Counts: map[string]int64{
			delta.ChangeInsert: ins, delta.ChangeUpdatePreimage: upd, delta.ChangeUpdatePostimage: upd, delta.ChangeDelete: del}}
	}
	return out, nil
}

// diffResult is the difference of two versions by key.
type diffResult struct {
	From           int64    `json:"from"`
	To             int64    `json:"to"`
	Keys           []string `json:"keys"`
	Added          int      `json:"added"`
	Removed        int      `json:"removed"`
	Changed        int      `json:"changed"`
	ColumnsAdded   []string `json:"columns_added"`
	ColumnsDropped []string `json:"columns_dropped"`
	// ColumnsRenamed are the columns the older version has under another name (the same
	// column mapping id): compared as one column, shown under the newer name.
	ColumnsRenamed []renamedColumn `json:"columns_renamed"`
	Columns        []colType       `json:"columns"`
	Rows           []diffRow       `json:"rows"`
	Truncated      bool            `json:"truncated"`
	FilesRead      int             `json:"files_read"`
	RowsRead       int64           `json:"rows_read"`
}

type renamedColumn struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// diffRow is one key that differs: its row before and after, aligned with Columns
// (null where a side has no row or no such column).
type diffRow struct {
	Kind    string   `json:"kind"`
	Key     []cell   `json:"key"`
	Changed []string `json:"changed,omitempty"`
	Before  []cell   `json:"before,omitempty"`
	After   []cell   `json:"after,omitempty"`
}

// IsChanged reports whether column name changed in this row (pages mark the cell).
func (d diffRow) IsChanged(name string) bool { return slices.Contains(d.Changed, name) }

type diffQuery struct {
	from, to *int64
	keys     []string
	filter   expr.Predicate
	limit    int
}

func (s *Server) parseDiffQuery(q url.Values) (*diffQuery, error) {
	dq := &diffQuery{}
	var err error
	if dq.from, err = optVersion(q, "from"); err != nil {
		return nil, err
	}
	if dq.to, err = optVersion(q, "to"); err != nil {
		return nil, err
	}
	dq.keys = splitList(q["key"])
	if w := strings.TrimSpace(q.Get("where")); w != "" {
		if len(w) > 4096 {
			return nil, badRequestf("where: longer than 4096 bytes")
		}
		if dq.filter, err = expr.Parse(w); err != nil {
			return nil, badRequestf("where: %v", err)
		}
	}
	if dq.limit, err = s.parseLimit(q, defaultPageRows); err != nil {
		return nil, err
	}
	return dq, nil
}

// maxDiffRows bounds the rows a diff reads (the files that differ).
const maxDiffRows = 500_000

func (s *Server) diff(ctx context.Context, ref *tableRef, dq *diffQuery) (*diffResult, error) {
	t, err := s.mustOpen(ctx, ref)
	if err != nil {
		return nil, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	to := snap.Version()
	if dq.to != nil {
		to = min(*dq.to, to)
	}
	from := max(to-1, 0)
	if dq.from != nil {
		from = *dq.from
	}
	keys := dq.keys
	if len(keys) == 0 {
		keys = ref.spec.TableKeys(ref.Name)
	}
	d, err := t.DiffVersions(ctx, from, to, delta.DiffOptions{Keys: keys, Filter: dq.filter, MaxRows: maxDiffRows, TableURI: tableURI(ref)})
	if err != nil {
		if errors.Is(err, delta.ErrDiffTooLarge) {
			return nil, badRequestf("%v: narrow it with where", err)
		}
		return nil, badRequestf("%v", err)
	}
	defer d.Release()
	return diffView(d, from, to, dq.limit), nil
}

// diffView is a diff of versions from and to as the page and the API show it: the
// columns (the dropped ones last), at most limit rows with their cells and keys.
func diffView(d *delta.Diff, from, to int64, limit int) *diffResult {
	res := &diffResult{From: from, To: to, Keys: d.Keys, Added: d.Added, Removed: d.Removed, Changed: d.Changed,
		ColumnsAdded: nonNil(d.AddedColumns), ColumnsDropped: nonNil(d.DroppedColumns), ColumnsRenamed: []renamedColumn{},
		FilesRead: d.FilesRead, RowsRead: d.RowsRead, Rows: []diffRow{}}
	for _, r := range d.RenamedColumns {
		res.ColumnsRenamed = append(res.ColumnsRenamed, renamedColumn{From: r[0], To: r[1]})
	}
	if res.Keys == nil {
		res.Keys = []string{}
	}
	var schema *arrow.Schema
	switch {
	case d.After != nil && d.After.NumCols() > 0:
		schema = d.After.Schema()
	case d.Before != nil:
		schema = d.Before.Schema()
	}
	if schema == nil {
		return res
	}
	res.Columns = columnsOf(schema, nil)
	for _, name := range d.DroppedColumns {
		if d.Before != nil {
			if i := fieldIdx(d.Before.Schema(), name); i >= 0 {
				res.Columns = append(res.Columns, colType{Name: name, Type: d.Before.Schema().Field(i).Type.String()})
			}
		}
	}
	side := func(rec arrow.RecordBatch, row int) []cell {
		out := make([]cell, len(res.Columns))
		for c, col := range res.Columns {
			i := fieldIdx(rec.Schema(), col.Name)
			if i < 0 {
				out[c] = cell(rowtext.Null)
				continue
			}
			out[c] = cell(rowtext.At(rec.Column(i), row))
		}
		return out
	}
	for _, rd := range d.Rows {
		if len(res.Rows) == limit {
			res.Truncated = true
			break
		}
		dr := diffRow{Kind: rd.Kind, Changed: rd.Changed}
		if rd.Before >= 0 {
			dr.Before = side(d.Before, rd.Before)
		}
		if rd.After >= 0 {
			dr.After = side(d.After, rd.After)
		}
		src := dr.After
		if src == nil {
			src = dr.Before
		}
		for _, k := range res.Keys {
			if i := slices.IndexFunc(res.Columns, func(c colType) bool { return strings.EqualFold(c.Name, k) }); i >= 0 {
				dr.Key = append(dr.Key, src[i])
			}
		}
		res.Rows = append(res.Rows, dr)
	}
	return res
}

func fieldIdx(s *arrow.Schema, name string) int {
	return slices.IndexFunc(s.Fields(), func(f arrow.Field) bool { return strings.EqualFold(f.Name, name) })
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
