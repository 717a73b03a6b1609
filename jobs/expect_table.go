package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// CheckExpectations runs the table checks of env.Expectations on the target of the stage whose
// config is cfg, after the stage succeeded with res: on the version the stage last
// committed to it (else the latest), and for max_change against the version before its
// first commit. The results go into res.Expectations; a failing check with on_violation:
// fail returns an *ExpectationError that says how to roll the commit back.
func CheckExpectations(ctx context.Context, env *Env, stage string, cfg Config, res *Result) error {
	var exps []*Expectation
	for i := range env.Expectations {
		if e := &env.Expectations[i]; !e.RowLevel() {
			exps = append(exps, e)
		}
	}
	target := ExpectationTarget(cfg)
	first, last := int64(-1), int64(-1)
	for _, v := range res.VersionsWritten {
		if v.Table == target {
			if first < 0 || v.Version < first {
				first = v.Version
			}
			last = max(last, v.Version)
		}
	}
	for i := range res.Expectations {
		if r := &res.Expectations[i]; r.Check == CheckExpect && r.Table == target && r.Version < 0 {
			r.Version = last // the rows were committed in it (-1: no commit)
		}
	}
	if len(exps) == 0 || target == "" {
		return nil
	}
	decl, err := env.declared(target)
	if err != nil {
		return err
	}
	if ok, err := env.tableExists(ctx, decl); err != nil || !ok {
		if err == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("table checks skipped: %s does not exist yet", target))
		}
		return err
	}
	tbl, err := delta.Open(ctx, env.Warehouse, decl.Path, env.Delta)
	if err != nil {
		return fmt.Errorf("table checks of %s: %w", target, err)
	}
	var snap *delta.Snapshot
	if last >= 0 {
		snap, err = tbl.SnapshotAt(ctx, last)
	} else {
		snap, err = tbl.Snapshot(ctx)
	}
	if err != nil {
		return fmt.Errorf("table checks of %s: %w", target, err)
	}
	rows, err := countRows(ctx, snap)
	if err != nil {
		return fmt.Errorf("table checks of %s: %w", target, err)
	}
	var failing *ExpectationError
	for _, e := range exps {
		r := ExpectationResult{Name: e.Name, Check: e.Check(), Action: e.Action(), Table: target, Version: snap.Version(), Rows: rows}
		if err := judge(ctx, tbl, snap, cfg, e, first, rows, &r); err != nil {
			return fmt.Errorf("expectation %s on %s version %d: %w", e.Name, target, snap.Version(), err)
		}
		res.Expectations = append(res.Expectations, r)
		if r.Failed == 0 {
			continue
		}
		env.Log().Warn("expectation failed", "expectation", e.Name, "table", target, "version", r.Version, "on_violation", r.Action, "detail", r.Detail)
		if e.Action() == ActionFail && failing == nil {
			failing = &ExpectationError{Stage: stage, Name: e.Name, Table: target, AfterCommit: true, Committed: first >= 0,
				Msg: fmt.Sprintf("version %d: %s", r.Version, r.Detail), Rollback: rollbackHint(env, target, first, last)}
		}
	}
	if failing != nil {
		return failing
	}
	return nil
}

// rollbackHint says how to undo the stage's commits to table (first..last, -1: none).
func rollbackHint(env *Env, table string, first, last int64) string {
	pipe := ""
	if env.PipelineFile != "" {
		pipe = " --pipeline " + env.PipelineFile
	}
	if first == 0 {
		return fmt.Sprintf("the stage created it (version 0); to undo the whole run: orchestrator runs rollback %s%s", env.Lineage.RunID, pipe)
	}
	return fmt.Sprintf("to roll it back: orchestrator table restore%s %s --version %d (or undo the whole run: orchestrator runs rollback %s%s)",
		pipe, table, first-1, env.Lineage.RunID, pipe)
}

// countRows counts a version's rows from its files' statistics (less the rows their
// deletion vectors delete), scanning when a file has none.
func countRows(ctx context.Context, snap *delta.Snapshot) (int64, error) {
	var n int64
	for _, a := range snap.Files() {
		r, ok := a.NumRecords()
		if !ok {
			return scanCount(ctx, snap)
		}
		n += r
	}
	return n, nil
}

func scanCount(ctx context.Context, snap *delta.Snapshot) (int64, error) {
	var n int64
	err := scanColumns(ctx, snap, nil, func(rec arrow.RecordBatch) error {
		n += rec.NumRows()
		return nil
	})
	return n, err
}

// scanColumns reads the named columns (nil: the first) of a version, batch by batch.
func scanColumns(ctx context.Context, snap *delta.Snapshot, cols []string, each func(arrow.RecordBatch) error) error {
	if cols == nil && len(snap.Schema().Fields) > 0 {
		cols = []string{snap.Schema().Fields[0].Name}
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols})
	if err != nil {
		return err
	}
	defer sc.Release()
	for sc.Next() {
		if err := each(sc.RecordBatch()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// judge runs one table check, filling r.Failed and r.Detail.
func judge(ctx context.Context, tbl *delta.Table, snap *delta.Snapshot, cfg Config, e *Expectation, first, rows int64, r *ExpectationResult) error {
	switch e.Check() {
	case CheckRowCount:
		if b := e.RowCount; b.Min != nil && rows < *b.Min || b.Max != nil && rows > *b.Max {
			r.Failed = 1
			r.Detail = fmt.Sprintf("%d rows, outside %s", rows, boundsText(b))
		}
	case CheckMaxChange:
		if first < 0 {
			r.Detail = "no commit to compare"
			return nil
		}
		var before int64
		if first > 0 {
			prev, err := tbl.SnapshotAt(ctx, first-1)
			if err != nil {
				return err
			}
			if before, err = countRows(ctx, prev); err != nil {
				return err
			}
		}
		if before == 0 {
			r.Detail = "no earlier rows to compare"
			return nil
		}
		change := float64(rows-before) / float64(before)
		if change < 0 {
			change = -change
		}
		if change > float64(*e.MaxChange) {
			r.Failed = 1
			r.Detail = fmt.Sprintf("%d rows at version %d, %d at version %d before the stage: a change of %.1f%%, above %s", rows, snap.Version(), before, max(first-1, 0), change*100, e.MaxChange)
		}
	case CheckNotNull:
		return checkNotNull(ctx, snap, e.NotNull, r)
	case CheckUnique:
		return checkUnique(ctx, snap, e.Unique, r)
	case CheckSCD2Invariants:
		c, ok := cfg.(*SCD2Config)
		if !ok {
			return fmt.Errorf("scd2_invariants needs an scd2_merge stage")
		}
		return checkSCD2(ctx, snap, c, r)
	}
	return nil
}

func boundsText(b *RowCountBounds) string {
	switch {
	case b.Min != nil && b.Max != nil:
		return fmt.Sprintf("[%d, %d]", *b.Min, *b.Max)
	case b.Min != nil:
		return fmt.Sprintf("min %d", *b.Min)
	default:
		return fmt.Sprintf("max %d", *b.Max)
	}
}

func checkNotNull(ctx context.Context, snap *delta.Snapshot, cols []string, r *ExpectationResult) error {
	nulls := make([]int64, len(cols))
	err := scanColumns(ctx, snap, cols, func(rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		for i := 0; i < n; i++ {
			bad := false
			for j := range cols {
				if rec.Column(j).IsNull(i) {
					nulls[j]++
					bad = true
				}
			}
			if bad {
				r.Failed++
			}
		}
		return nil
	})
	if r.Failed > 0 {
		var parts []string
		for j, c := range cols {
			if nulls[j] > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d", c, nulls[j]))
			}
		}
		r.Detail = fmt.Sprintf("%d rows hold NULL (%s)", r.Failed, strings.Join(parts, ", "))
	}
	return err
}

// keyText renders the values of cols in row i as a key (and its display), or ok false
// when one is NULL.
func expectKeyText(rec arrow.RecordBatch, cols []int, i int) (key string, ok bool) {
	var b strings.Builder
	for n, j := range cols {
		v := rowtext.At(rec.Column(j), i)
		if v.Null {
			return "", false
		}
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Text)
	}
	return b.String(), true
}

func checkUnique(ctx context.Context, snap *delta.Snapshot, cols []string, r *ExpectationResult) error {
	counts := map[string]int64{}
	idx := make([]int, len(cols))
	for i := range idx {
		idx[i] = i
	}
	err := scanColumns(ctx, snap, cols, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			if k, ok := expectKeyText(rec, idx, i); ok {
				counts[k]++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var dups []string
	keys := 0
	for k, n := range counts {
		if n > 1 {
			r.Failed += n
			keys++
			dups = append(dups, fmt.Sprintf("(%s) ×%d", k, n))
		}
	}
	if keys > 0 {
		slices.Sort(dups)
		r.Detail = fmt.Sprintf("%d values of (%s) occur more than once, in %d rows: %s", keys, strings.Join(cols, ", "), r.Failed, sample(dups))
	}
	return nil
}

func sample(items []string) string {
	const n = 3
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}

// version is one row of an SCD2 dimension, for the invariants.
type version struct {
	from, to rowtext.Key
	open     bool // valid_to is NULL
	current  bool
}

// checkSCD2 checks a type 2 dimension: at most one current row per key, and no two
// versions of a key whose [valid_from, valid_to) intervals overlap (an open valid_to
// runs to the end of time).
func checkSCD2(ctx context.Context, snap *delta.Snapshot, c *SCD2Config, r *ExpectationResult) error {
	cols := c.Columns.WithDefaults()
	names := append(slices.Clone(c.Keys), cols.ValidFrom, cols.ValidTo, cols.IsCurrent)
	k := len(c.Keys)
	keyIdx := make([]int, k)
	for i := range keyIdx {
		keyIdx[i] = i
	}
	byKey := map[string][]version{}
	err := scanColumns(ctx, snap, names, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			key, ok := expectKeyText(rec, keyIdx, i)
			if !ok {
				continue
			}
			cur := rowtext.At(rec.Column(k+2), i)
			byKey[key] = append(byKey[key], version{from: rowtext.KeyAt(rec.Column(k), i), to: rowtext.KeyAt(rec.Column(k+1), i),
				open: rec.Column(k + 1).IsNull(i), current: !cur.Null && cur.Text == "true"})
		}
		return nil
	})
	if err != nil {
		return err
	}
	var currents, overlaps []string
	for key, vs := range byKey {
		nc := 0
		for _, v := range vs {
			if v.current {
				nc++
			}
		}
		if nc > 1 {
			currents = append(currents, fmt.Sprintf("(%s) has %d current rows", key, nc))
			r.Failed += int64(len(vs))
			continue
		}
		slices.SortFunc(vs, func(a, b version) int { return rowtext.Compare(a.from, b.from) })
		for i := 0; i+1 < len(vs); i++ {
			// An open interval (valid_to NULL) overlaps any later one; a closed one
			// overlaps the next when it ends after the next begins.
			if vs[i].open || rowtext.Compare(vs[i].to, vs[i+1].from) > 0 {
				overlaps = append(overlaps, fmt.Sprintf("(%s) has overlapping versions", key))
				r.Failed += int64(len(vs))
				break
			}
		}
	}
	if len(currents)+len(overlaps) > 0 {
		slices.Sort(currents)
		slices.Sort(overlaps)
		var parts []string
		if len(currents) > 0 {
			parts = append(parts, fmt.Sprintf("%d keys with more than one current row: %s", len(currents), sample(currents)))
		}
		if len(overlaps) > 0 {
			parts = append(parts, fmt.Sprintf("%d keys with overlapping validity intervals (%s, %s): %s", len(overlaps), cols.ValidFrom, cols.ValidTo, sample(overlaps)))
		}
		r.Detail = strings.Join(parts, "; ")
	}
	return nil
}
