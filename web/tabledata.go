package web

import (
	"container/heap"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// cell is a value as the API writes it (its JSON value, null for null) and a page
// shows it (Text, or NULL).
type cell rowtext.Value

func (c cell) MarshalJSON() ([]byte, error) {
	if c.Null || c.JSON == nil {
		return []byte("null"), nil
	}
	return rowtext.Marshal(c.JSON)
}

type colType struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Numeric bool   `json:"-"`
}

// columnsOf names the columns of records and their types as the table declares them
// (Delta's names: string, decimal(10,2), timestamp), else Arrow's.
func columnsOf(s *arrow.Schema, table *delta.StructType) []colType {
	out := make([]colType, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = colType{Name: f.Name, Type: f.Type.String(), Numeric: rowtext.Numeric(f.Type)}
		if table != nil {
			if df := table.Field(f.Name); df != nil {
				out[i].Type = df.Type.String()
				continue
			}
		}
		if dt, err := delta.DataTypeFromArrow(f.Type); err == nil {
			out[i].Type = dt.String()
		}
	}
	return out
}

// historyRow is one version of a table, as DESCRIBE HISTORY shows it.
type historyRow struct {
	Version    int64          `json:"version"`
	Timestamp  time.Time      `json:"timestamp"`
	Operation  string         `json:"operation"`
	User       string         `json:"user,omitempty"`
	Engine     string         `json:"engine,omitempty"`
	Pipeline   string         `json:"pipeline,omitempty"`
	Stage      string         `json:"stage,omitempty"`
	Run        string         `json:"run,omitempty"`
	Attempt    int            `json:"attempt,omitempty"`
	Summary    string         `json:"summary,omitempty"`
	Metrics    map[string]any `json:"metrics,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Checks are the expectations that judged the version (expect_pages.go).
	Checks []scheduler.Check `json:"checks,omitempty"`
	// Lookups are a fact_load's counts per lookup: the facts of the version's run keyed
	// to a real, unknown or inferred member, or quarantined.
	Lookups []delta.LookupMetrics `json:"lookups,omitempty"`
}

func (s *Server) history(ctx context.Context, ref *tableRef, limit int) ([]historyRow, error) {
	t, err := s.mustOpen(ctx, ref)
	if err != nil {
		return nil, err
	}
	entries, err := t.History(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]historyRow, len(entries))
	for i, h := range entries {
		r := historyRow{Version: h.Version, Timestamp: h.Timestamp.UTC(), Operation: h.Operation, User: h.UserName, Engine: h.EngineInfo,
			Summary: h.Summary(), Metrics: h.OperationMetrics, Parameters: h.OperationParameters}
		if l := h.Lineage; l != nil {
			r.Pipeline, r.Stage, r.Run, r.Attempt = l.Pipeline, l.Stage, l.RunID, l.Attempt
			r.Lookups = l.Lookups
		}
		out[i] = r
	}
	s.addChecks(ctx, ref.Name, entries, out)
	return out, nil
}

// rowsQuery is a read of a table's rows as of a version or time.
type rowsQuery struct {
	version   *int64
	timestamp time.Time
	where     string
	filter    expr.Predicate
	columns   []string
	orderBy   string
	desc      bool
	limit     int
	// rowIDs adds each row's row id and row commit version (row tracking).
	rowIDs bool
}

func (s *Server) parseRowsQuery(q url.Values) (*rowsQuery, error) {
	rq := &rowsQuery{limit: defaultPageRows}
	var err error
	if rq.version, err = optVersion(q, "version"); err != nil {
		return nil, err
	}
	if v := q.Get("timestamp"); v != "" {
		if rq.version != nil {
			return nil, badRequestf("version and timestamp are exclusive")
		}
		if rq.timestamp, err = parseTime(v); err != nil {
			return nil, badRequestf("timestamp: %v", err)
		}
	}
	if rq.where = strings.TrimSpace(q.Get("where")); rq.where != "" {
		if len(rq.where) > 4096 {
			return nil, badRequestf("where: longer than 4096 bytes")
		}
		if rq.filter, err = expr.Parse(rq.where); err != nil {
			return nil, badRequestf("where: %v", err)
		}
	}
	rq.columns = splitList(q["columns"])
	rq.orderBy = strings.TrimSpace(q.Get("order_by"))
	rq.desc = q.Get("desc") == "true" || q.Get("desc") == "1" || q.Get("desc") == "on"
	rq.rowIDs = q.Get("row_ids") == "true" || q.Get("row_ids") == "1" || q.Get("row_ids") == "on"
	if rq.limit, err = s.parseLimit(q, defaultPageRows); err != nil {
		return nil, err
	}
	return rq, nil
}

func (s *Server) parseLimit(q url.Values, def int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return min(def, s.cfg.MaxRows), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.cfg.MaxRows {
		return 0, badRequestf("limit %q: want a number from 1 to %d", v, s.cfg.MaxRows)
	}
	return n, nil
}

func optVersion(q url.Values, key string) (*int64, error) {
	v := q.Get(key)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, badRequestf("%s %q: want a version number (0 or more)", key, v)
	}
	return &n, nil
}

// parseTime reads a time: RFC 3339, a date and time without a zone (UTC), or a date.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-01-14T10:00:00Z), a UTC date and time (2026-01-14T10:00:00) or a date (2026-01-14)", s)
}

// rowsResult is a table's rows as of a version.
type rowsResult struct {
	Version   int64     `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	Columns   []colType `json:"columns"`
	Rows      [][]cell  `json:"rows"`
	// Truncated: more rows matched than the limit.
	Truncated bool `json:"truncated"`
	// SchemaChangedSince says how the schema changed from this version to the latest
	// (none: it is the latest's): the rows are shown in this version's own schema.
	SchemaChangedSince []string `json:"schema_changed_since,omitempty"`
}

func (s *Server) rows(ctx context.Context, ref *tableRef, rq *rowsQuery) (*rowsResult, error) {
	t, err := s.mustOpen(ctx, ref)
	if err != nil {
		return nil, err
	}
	var snap *delta.Snapshot
	switch {
	case rq.version != nil:
		snap, err = t.SnapshotAt(ctx, *rq.version)
	case !rq.timestamp.IsZero():
		snap, err = t.SnapshotAsOf(ctx, rq.timestamp)
	default:
		snap, err = t.Snapshot(ctx)
	}
	if err != nil {
		return nil, badRequestf("%v", err)
	}
	opts := delta.ScanOptions{Columns: rq.columns, Filter: rq.filter, TableURI: tableURI(ref)}
	hidden := false
	switch {
	case rq.orderBy == "":
	case rq.rowIDs && (strings.EqualFold(rq.orderBy, delta.RowIDColumn) || strings.EqualFold(rq.orderBy, delta.RowCommitVersionColumn)):
	default:
		f := snap.Schema().Field(rq.orderBy)
		if f == nil {
			return nil, badRequestf("order_by: no column %q", rq.orderBy)
		}
		rq.orderBy = f.Name
		if len(opts.Columns) > 0 && !slices.ContainsFunc(opts.Columns, func(c string) bool { return strings.EqualFold(c, f.Name) }) {
			opts.Columns, hidden = append(slices.Clone(opts.Columns), f.Name), true
		}
	}
	var sc array.RecordReader
	if rq.rowIDs {
		sc, err = snap.ScanWithRowIDs(ctx, opts)
	} else {
		sc, err = snap.Scan(ctx, opts)
	}
	if err != nil {
		return nil, badRequestf("%v", err)
	}
	defer sc.Release()
	res := &rowsResult{Version: snap.Version(), Timestamp: snap.Timestamp().UTC(), Columns: columnsOf(sc.Schema(), snap.Schema()), Rows: [][]cell{}}
	if latest, err := t.Snapshot(ctx); err == nil && latest.Version() != snap.Version() {
		for _, c := range delta.DiffSchemas(snap.Schema(), latest.Schema()) {
			res.SchemaChangedSince = append(res.SchemaChangedSince, c.String())
		}
	}
	orderCol := -1
	if rq.orderBy != "" {
		orderCol = slices.IndexFunc(sc.Schema().Fields(), func(f arrow.Field) bool { return strings.EqualFold(f.Name, rq.orderBy) })
	}
	var shownCols []int // the columns shown: all but a hidden order column
	for i := range res.Columns {
		if !hidden || i != orderCol {
			shownCols = append(shownCols, i)
		}
	}
	if hidden {
		res.Columns = slices.Delete(res.Columns, orderCol, orderCol+1)
	}
	shown := shownCols
	top := &topRows{limit: rq.limit, desc: rq.desc}
	for sc.Next() {
		rec := sc.RecordBatch()
		for r := range int(rec.NumRows()) {
			if orderCol < 0 {
				if len(res.Rows) == rq.limit {
					res.Truncated = true
					return res, nil
				}
				res.Rows = append(res.Rows, rowCellsOf(rec, r, shown))
				continue
			}
			top.offer(rowtext.KeyAt(rec.Column(orderCol), r), func() []cell { return rowCellsOf(rec, r, shown) })
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if orderCol >= 0 {
		res.Rows, res.Truncated = top.sorted(), top.dropped
	}
	return res, nil
}

func rowCells(rec arrow.RecordBatch, r, n int) []cell {
	out := make([]cell, n)
	for c := range n {
		out[c] = cell(rowtext.At(rec.Column(c), r))
	}
	return out
}

// rowCellsOf is row r of rec's columns cols.
func rowCellsOf(rec arrow.RecordBatch, r int, cols []int) []cell {
	out := make([]cell, len(cols))
	for c, i := range cols {
		out[c] = cell(rowtext.At(rec.Column(i), r))
	}
	return out
}

// topRows keeps the first limit rows by a key (a bounded heap: memory follows the
// limit, not the table); ties keep their scan order.
type topRows struct {
	limit   int
	desc    bool
	items   []topItem
	n       int
	dropped bool
}

type topItem struct {
	key   rowtext.Key
	seq   int
	cells []cell
}

// before reports whether a comes before b in the result.
func (t *topRows) before(a, b topItem) bool {
	c := rowtext.Compare(a.key, b.key)
	if t.desc {
		c = -c
	}
	if c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

func (t *topRows) Len() int           { return len(t.items) }
func (t *topRows) Less(i, j int) bool { return t.before(t.items[j], t.items[i]) } // the worst on top
func (t *topRows) Swap(i, j int)      { t.items[i], t.items[j] = t.items[j], t.items[i] }
func (t *topRows) Push(x any)         { t.items = append(t.items, x.(topItem)) }
func (t *topRows) Pop() any {
	it := t.items[len(t.items)-1]
	t.items = t.items[:len(t.items)-1]
	return it
}

func (t *topRows) offer(k rowtext.Key, cells func() []cell) {
	it := topItem{key: k, seq: t.n}
	t.n++
	if len(t.items) < t.limit {
		it.cells = cells()
		heap.Push(t, it)
		return
	}
	t.dropped = true
	if t.before(it, t.items[0]) {
		it.cells = cells()
		t.items[0] = it
		heap.Fix(t, 0)
	}
}

func (t *topRows) sorted() [][]cell {
	items := slices.Clone(t.items)
	slices.SortFunc(items, func(a, b topItem) int {
		if t.before(a, b) {
			return -1
		}
		return 1
	})
	out := make([][]cell, len(items))
	for i, it := range items {
		out[i] = it.cells
	}
	return out
}
