package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
)

// rowChecks evaluates a stage's row expectations on the batches it is about to write
// (one per stage run): each predicate is evaluated over a whole batch at once
// (expr.Matcher: typed loops over the common column types), violators are counted,
// dropped, set aside for the quarantine table or stop the run.
type rowChecks struct {
	stage, table string
	checks       []*rowCheck
	// lines: the rows' file lines are decoded, for a fail (its error names the line)
	// or a quarantine (which keeps it); warn and drop name a row by its record number
	// in the file, sparing the decoder the line column.
	lines bool

	mu sync.Mutex // guards the counts, read by commits (Env.lineage)
}

type rowCheck struct {
	exp     *Expectation
	pred    expr.Predicate
	m       *expr.Matcher
	schema  *arrow.Schema // the one m was bound to
	checked int64
	failed  int64
	sample  string
}

// newRowChecks prepares the row expectations of exps (nil when there are none).
func newRowChecks(stage, table string, exps []Expectation) (*rowChecks, error) {
	rc := &rowChecks{stage: stage, table: table}
	for i := range exps {
		e := &exps[i]
		if !e.RowLevel() {
			continue
		}
		p, err := expr.Parse(e.Expect)
		if err != nil {
			return nil, fmt.Errorf("expectation %s: %q: %w", e.Name, e.Expect, err)
		}
		rc.checks = append(rc.checks, &rowCheck{exp: e, pred: p})
		if a := e.Action(); a == ActionFail || a == ActionQuarantine {
			rc.lines = true // the error names the line, the quarantine keeps it
		}
	}
	if len(rc.checks) == 0 {
		return nil, nil
	}
	return rc, nil
}

// metrics are the counts so far, as commits record them.
func (rc *rowChecks) metrics() []delta.ExpectationMetrics {
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]delta.ExpectationMetrics, len(rc.checks))
	for i, c := range rc.checks {
		out[i] = delta.ExpectationMetrics{Name: c.exp.Name, OnViolation: c.exp.Action(),
			NumCheckedRows: c.checked, NumPassedRows: c.checked - c.failed, NumFailedRows: c.failed}
	}
	return out
}

// results are the counts so far as stage results.
func (rc *rowChecks) results() []ExpectationResult {
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]ExpectationResult, len(rc.checks))
	for i, c := range rc.checks {
		out[i] = ExpectationResult{Name: c.exp.Name, Check: CheckExpect, Action: c.exp.Action(), Table: rc.table,
			Version: -1, Rows: c.checked, Failed: c.failed, Detail: c.sample}
	}
	return out
}

// check evaluates the row checks on rec, rows of file whose first row is the file's row
// first+1 (1-based; Parquet has no lines). It returns the rows to write (rec itself,
// retained, when all stay; else one or more batches, each to be released), the
// violators to quarantine, or the error of a failing check. strip names a column to leave out of the batch returned (the line column the
// checks asked for).
func (rc *rowChecks) check(rec arrow.RecordBatch, file string, first int64, strip string) ([]arrow.RecordBatch, []*badRecord, error) {
	return rc.checkAt(rec, rowSite{file: file, first: first, strip: strip})
}

// rowSite says where the rows a check judges come from: a source file (ingest), or,
// for a stage that writes rows it derived from a table, at names row i's origin.
// subject, when set, marks the rows the checks judge (the others, such as a merge's
// delete events, are neither counted nor judged, and are kept).
// movable, when set, marks the subject rows that drop and quarantine checks judge (a
// fact load's new facts, not its re-keyed ones); warn and fail checks judge them all.
type rowSite struct {
	file    string
	first   int64
	strip   string
	at      func(i int) string
	subject []bool
	movable []bool
}

// checkAt is check for the rows of site.
func (rc *rowChecks) checkAt(rec arrow.RecordBatch, site rowSite) ([]arrow.RecordBatch, []*badRecord, error) {
	keep, bad, err := rc.judge(rec, site)
	if err != nil {
		return nil, nil, err
	}
	out := rec
	out.Retain()
	if site.strip != "" {
		if idx := out.Schema().FieldIndices(site.strip); len(idx) == 1 {
			fields := slices.Delete(slices.Clone(out.Schema().Fields()), idx[0], idx[0]+1)
			cols := slices.Delete(slices.Clone(out.Columns()), idx[0], idx[0]+1)
			stripped := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, out.NumRows())
			out.Release()
			out = stripped
		}
	}
	if keep == nil {
		return []arrow.RecordBatch{out}, bad, nil
	}
	defer out.Release()
	parts, err := keptParts(out, keep)
	return parts, bad, err
}

// countMarked counts the rows marked in both masks (a nil mask marks every row).
func countMarked(n int, a, b []bool) int64 {
	var k int64
	for i := range n {
		if (a == nil || a[i]) && (b == nil || b[i]) {
			k++
		}
	}
	return k
}

// judge evaluates the row checks on the rows of site: keep marks the rows to write (nil:
// all of them), bad the violators to quarantine (each with its row in rec); a failing
// check's error stops the run.
func (rc *rowChecks) judge(rec arrow.RecordBatch, site rowSite) (keep []bool, bad []*badRecord, err error) {
	file, first, subject := site.file, site.first, site.subject
	n := int(rec.NumRows())
	quarantined := map[int]bool{}
	lineCol := -1
	if idx := rec.Schema().FieldIndices(lineColumn); len(idx) == 1 {
		lineCol = idx[0]
	}
	where := func(i int) (line, row int64) {
		row = first + int64(i) + 1
		if lineCol >= 0 {
			if a, ok := rec.Column(lineCol).(*array.Int64); ok && a.IsValid(i) {
				line = a.Value(i)
			}
		}
		return line, row
	}
	pos := func(i int) string {
		if site.at != nil {
			return site.at(i)
		}
		line, row := where(i)
		return position(file, line, row)
	}
	for _, c := range rc.checks {
		moves := c.exp.Action() == ActionDrop || c.exp.Action() == ActionQuarantine
		judged := countMarked(n, subject, nil)
		if moves && site.movable != nil {
			judged = countMarked(n, subject, site.movable)
		}
		if c.m == nil || !c.schema.Equal(rec.Schema()) {
			m, err := expr.NewMatcher(c.pred, schemaOfRecord(rec))
			if err != nil {
				return nil, nil, fmt.Errorf("expectation %s (%s): %w", c.exp.Name, c.exp.Expect, err)
			}
			c.m, c.schema = m, rec.Schema()
		}
		ok, err := c.m.Match(rec)
		if err != nil {
			return nil, nil, fmt.Errorf("expectation %s (%s): %w", c.exp.Name, c.exp.Expect, err)
		}
		var failed int64
		firstBad := -1
		for i, pass := range ok {
			if pass || subject != nil && !subject[i] || moves && site.movable != nil && !site.movable[i] {
				continue
			}
			failed++
			if firstBad < 0 {
				firstBad = i
			}
			switch c.exp.Action() {
			case ActionDrop, ActionQuarantine:
				if keep == nil {
					keep = make([]bool, n)
					for j := range keep {
						keep[j] = true
					}
				}
				keep[i] = false
				if c.exp.Action() == ActionQuarantine && !quarantined[i] {
					quarantined[i] = true
					if site.at != nil { // a row from a table: its origin, no line
						bad = append(bad, &badRecord{file: site.at(i), expectation: c.exp.Name, row: i, err: violation(rec, i, c, site.at(i), 0, 0)})
						continue
					}
					line, row := where(i)
					bad = append(bad, &badRecord{file: file, expectation: c.exp.Name, err: violation(rec, i, c, file, line, row)})
				}
			}
		}
		rc.mu.Lock()
		c.checked += judged
		c.failed += failed
		if firstBad >= 0 && c.sample == "" {
			c.sample = fmt.Sprintf("first at %s: %s", pos(firstBad), rowJSON(rec, firstBad))
		}
		rc.mu.Unlock()
		if firstBad >= 0 && c.exp.Action() == ActionFail {
			return nil, nil, &ExpectationError{Stage: rc.stage, Name: c.exp.Name, Table: rc.table,
				Msg: fmt.Sprintf("%s: row %s is not %s (%d of this batch's %d rows violate it)", pos(firstBad), rowJSON(rec, firstBad), c.exp.Expect, failed, judged)}
		}
	}
	return keep, bad, nil
}

// maxRuns is the most runs of kept rows a batch is concatenated from; beyond it the
// kept rows are gathered by a filter.
const maxRuns = 64

// keptParts are the rows of rec that keep marks, in one new batch: with a violation
// here and there (the common case), each column is concatenated from the runs of kept
// rows between them (a copy of each run's buffers at once), else filtered row by row.
func keptParts(rec arrow.RecordBatch, keep []bool) ([]arrow.RecordBatch, error) {
	var runs [][2]int64
	start := -1
	for i, k := range keep {
		switch {
		case k && start < 0:
			start = i
		case !k && start >= 0:
			runs = append(runs, [2]int64{int64(start), int64(i)})
			start = -1
		}
	}
	if start >= 0 {
		runs = append(runs, [2]int64{int64(start), int64(len(keep))})
	}
	if len(runs) == 0 {
		return nil, nil
	}
	if len(runs) <= maxRuns {
		cols := make([]arrow.Array, rec.NumCols())
		rows := int64(0)
		for _, r := range runs {
			rows += r[1] - r[0]
		}
		for j, col := range rec.Columns() {
			pieces := make([]arrow.Array, len(runs))
			for k, r := range runs {
				pieces[k] = array.NewSlice(col, r[0], r[1])
			}
			c, err := array.Concatenate(pieces, memory.DefaultAllocator)
			arrowx.ReleaseArrays(pieces)
			if err != nil {
				arrowx.ReleaseArrays(cols[:j])
				return nil, err
			}
			cols[j] = c
		}
		out := array.NewRecordBatch(rec.Schema(), cols, rows)
		arrowx.ReleaseArrays(cols)
		return []arrow.RecordBatch{out}, nil
	}
	mask := array.NewBoolean(len(keep), memory.NewBufferBytes(boolBits(keep)), nil, 0)
	defer mask.Release()
	filtered, err := compute.FilterRecordBatch(context.Background(), rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{filtered}, nil
}

// violation is a violating row as a quarantine record: where it is, the first column
// the predicate reads and its value, the row as JSON, and the expectation it broke.
func violation(rec arrow.RecordBatch, i int, c *rowCheck, file string, line, row int64) *decode.Error {
	e := &decode.Error{File: file, Line: line, Row: row, Record: rowJSON(rec, i),
		Msg: fmt.Sprintf("expectation %s violated: %s", c.exp.Name, c.exp.Expect)}
	if cols := expr.Columns(c.pred); len(cols) > 0 {
		e.Column = cols[0]
		if idx := rec.Schema().FieldIndices(cols[0]); len(idx) == 1 {
			if v := rowtext.At(rec.Column(idx[0]), i); !v.Null {
				e.Value = v.Text
			}
		}
	}
	return e
}

func position(file string, line, row int64) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Sprintf("%s record %d", file, row)
}

// rowJSON renders row i of rec as a JSON object of its table columns (not the internal
// ones a keyed ingest adds).
func rowJSON(rec arrow.RecordBatch, i int) string {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for j, f := range rec.Schema().Fields() {
		if strings.HasPrefix(f.Name, "_orchestrator_") || f.Name == factDeleteColumn {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteByte(':')
		v := rowtext.At(rec.Column(j), i)
		if v.Null {
			b.WriteString("null")
			continue
		}
		enc, err := json.Marshal(v.JSON)
		if err != nil {
			enc, _ = json.Marshal(v.Text)
		}
		b.Write(enc)
	}
	b.WriteByte('}')
	return b.String()
}

// boolBits packs bs as an Arrow bitmap.
func boolBits(bs []bool) []byte {
	out := make([]byte, (len(bs)+7)/8)
	for i, b := range bs {
		if b {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// moves reports whether a row check drops or quarantines its violators.
func (rc *rowChecks) moves() bool {
	if rc == nil {
		return false
	}
	for _, c := range rc.checks {
		if a := c.exp.Action(); a == ActionDrop || a == ActionQuarantine {
			return true
		}
	}
	return false
}

// quarantines reports whether a row check quarantines its violators.
func (rc *rowChecks) quarantines() bool {
	if rc == nil {
		return false
	}
	for _, c := range rc.checks {
		if c.exp.Action() == ActionQuarantine {
			return true
		}
	}
	return false
}

// startRowChecks prepares the row checks of one run of a stage that writes table
// (env.rows; nil when the stage declares none). A run that is tried again after a
// conflict starts its counts afresh.
func (env *Env) startRowChecks(stage, table string) error {
	env.rows = nil
	if len(env.Expectations) == 0 {
		return nil
	}
	rc, err := newRowChecks(stage, table, env.Expectations)
	if err != nil {
		return err
	}
	env.rows = rc
	return nil
}

// rowResults are the counts of the row checks of the stage's last run (nil without).
func (env *Env) rowResults() []ExpectationResult { return env.rows.results() }

// columns are the columns the row checks read.
func (rc *rowChecks) columns() []string {
	if rc == nil {
		return nil
	}
	var out []string
	for _, c := range rc.checks {
		out = append(out, expr.Columns(c.pred)...)
	}
	return out
}

// keep checks rec, rows a stage derived from a table rather than decoded from a file
// (at names row i's origin; subject, when set, marks the rows judged), and returns
// the rows to write as one batch (rec itself, retained, when all stay) and those to
// quarantine (each with its row in rec).
func (rc *rowChecks) keep(rec arrow.RecordBatch, at func(i int) string, subject []bool) (arrow.RecordBatch, []*badRecord, error) {
	parts, bad, err := rc.checkAt(rec, rowSite{at: at, subject: subject})
	if err != nil {
		return nil, nil, err
	}
	switch len(parts) {
	case 0:
		return rec.NewSlice(0, 0), bad, nil
	case 1:
		return parts[0], bad, nil
	}
	defer arrowx.ReleaseRecords(parts)
	out, err := arrowx.Concat(memory.DefaultAllocator, parts)
	return out, bad, err
}
