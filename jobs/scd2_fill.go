package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// fillNewColumns is new_columns: fill. Tracked columns the dimension gained by a schema
// evolution (delta.ColumnAddedAt) are filled in its open versions from the source's
// newest row of each key (by sequence_by, else the last read), in one UPDATE commit
// whose txn (appId "scd2_fill:<source>:<columns>") makes it once only; the versions'
// values are taken as they were, not as a change. Where an open version already holds
// a value, it stays. The merge that follows then finds those values unchanged. The
// stage's row checks judge the rows filled from (see the loop below).
func (s *SCD2Merge) fillNewColumns(ctx context.Context, env *Env, f *flow, l *scdLayout, res *Result) error {
	if s.cfg.NewColumns != "fill" {
		return nil
	}
	var cols []string
	for _, i := range l.spec.tracked {
		if c := f.dstSnap.Schema().Field(l.data[i].Name); c != nil {
			if _, ok := delta.ColumnAddedAt(c); ok && f.srcSnap.Schema().Field(c.Name) != nil {
				cols = append(cols, c.Name)
			}
		}
	}
	if len(cols) == 0 {
		return nil
	}
	appID := "scd2_fill:" + s.cfg.Source + ":" + strings.Join(cols, ",")
	if _, done := f.dstSnap.TxnVersion(appID); done {
		return nil
	}
	read := slices.Concat(s.cfg.Keys, cols)
	if s.cfg.SequenceBy != "" {
		read = append(read, s.cfg.SequenceBy)
	}
	seqAt := len(read) - 1
	for _, c := range env.rows.columns() { // the row checks judge the rows filled from
		if !slices.ContainsFunc(read, func(r string) bool { return strings.EqualFold(r, c) }) && f.srcSnap.Schema().Field(c) != nil {
			read = append(read, c)
		}
	}
	sc, err := f.srcSnap.Scan(ctx, delta.ScanOptions{Columns: read})
	if err != nil {
		return err
	}
	defer sc.Release()
	type at struct {
		rec, row int
		seq      int64
	}
	newest := map[string]at{}
	var recs []arrow.RecordBatch
	defer func() { arrowx.ReleaseRecords(recs) }()
	var key strings.Builder
	for sc.Next() {
		rec := sc.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		var seq func(int) int64
		if s.cfg.SequenceBy != "" {
			var ok bool
			if seq, ok = orderGetter(rec.Column(seqAt)); !ok {
				return fmt.Errorf("new_columns: fill: sequence_by %s is not a time or integer column", s.cfg.SequenceBy)
			}
		}
		for r := range int(rec.NumRows()) {
			key.Reset()
			for k := range s.cfg.Keys {
				key.WriteString(rec.Column(k).ValueStr(r))
				key.WriteByte(0)
			}
			p := at{rec: len(recs) - 1, row: r}
			if seq != nil && !rec.Column(seqAt).IsNull(r) {
				p.seq = seq(r)
			}
			if old, ok := newest[key.String()]; !ok || p.seq >= old.seq {
				newest[key.String()] = p
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	rows := make([][]int32, len(recs))
	for _, p := range newest {
		rows[p.rec] = append(rows[p.rec], int32(p.row))
	}
	var src []arrow.RecordBatch
	defer func() { arrowx.ReleaseRecords(src) }()
	for i, rec := range recs {
		if len(rows[i]) == 0 {
			continue
		}
		slices.Sort(rows[i])
		g, err := arrowx.GatherRows(ctx, rec, rows[i])
		if err != nil {
			return err
		}
		if env.rows != nil {
			// The values filled are judged as the events that bring them are: a fail
			// stops the run before the fill, a drop or quarantine leaves the key's open
			// version unfilled (NULL). The row is not quarantined here: the fill takes
			// the value the source holds, not a change event; the event that brought
			// it is quarantined by the merge that reads it.
			at := func(r int) string {
				return fmt.Sprintf("%s version %d, the newest row of its key (new_columns: fill of %s)", s.cfg.Source, f.srcSnap.Version(), strings.Join(cols, ", "))
			}
			kept, _, err := env.rows.keep(g, at, nil)
			g.Release()
			if err != nil {
				return err
			}
			g = kept
		}
		src = append(src, g)
	}
	empty := make([]expr.Predicate, len(cols))
	set := map[string]any{}
	for i, c := range cols {
		empty[i] = expr.IsNull("target." + c)
		set[c] = expr.Col("source." + c)
	}
	mr, err := f.dst.Merge(ctx, delta.MergeOptions{
		Source: src,
		On:     s.cfg.Keys,
		WhenMatched: []delta.MergeClause{{
			Cond:   expr.And(expr.Eq("target."+l.curr, true), expr.Or(empty...)),
			Action: delta.MergeUpdate,
			Set:    set,
		}},
		Txn:       &delta.Txn{AppID: appID, Version: 1},
		Lineage:   env.lineage(),
		Operation: "UPDATE",
	})
	if err != nil {
		return fmt.Errorf("new_columns: fill %s: %w", strings.Join(cols, ", "), err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("new_columns: fill: %s filled in %d open versions (version %d)", strings.Join(cols, ", "), mr.NumTargetRowsUpdated, mr.Version))
	f.dstSnap, err = f.dst.Snapshot(ctx)
	return err
}

// orderGetter reads a sequence_by column's values as int64 in their order: times,
// dates and integers.
func orderGetter(arr arrow.Array) (func(int) int64, bool) {
	switch a := arr.(type) {
	case *array.Timestamp:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Date32:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	}
	return arrowx.IntGetter(arr)
}
