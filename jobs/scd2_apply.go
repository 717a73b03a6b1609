package jobs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// scdActionColumn marks each row of the MERGE source with what to do to the dimension.
const scdActionColumn = "_scd_action"

func isKeyIndex(keys []int, j int) bool {
	for _, k := range keys {
		if k == j {
			return true
		}
	}
	return false
}

// apply writes the fold's changes as one MERGE with the batch txn. The scan placed every
// stored version, so the MERGE matches by position instead of joining on (keys,
// valid_from): each change to a stored version is one source row matched with that
// version's row; each new version is an unmatched source row, inserted.
func (s *SCD2Merge) apply(ctx context.Context, env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, batch *scdBatch, changes []scdChange, sourceVersion int64, watermark *int64) (*delta.MergeResult, error) {
	sourceSchema, err := mergeSourceSchema(snap, l)
	if err != nil {
		return nil, err
	}
	// The MERGE source is built in two halves at once while the matches are placed
	// (its records are read in order: source row i is change i).
	half := len(changes) / 2
	var recs [2]arrow.RecordBatch
	var errs [2]error
	var wg sync.WaitGroup
	for k, part := range [][]scdChange{changes[:half], changes[half:]} {
		wg.Go(func() { recs[k], errs[k] = scdSourceRecord(sourceSchema, l, batch, part) })
	}
	defer func() {
		wg.Wait()
		releaseRecords([]arrow.RecordBatch{recs[0], recs[1]})
	}()
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	placed := map[string]*placedRows{}
	for i, c := range changes {
		if c.Old == nil {
			continue
		}
		if c.Old.at.file == "" {
			return nil, fmt.Errorf("internal error: a %s of a stored version that the scan did not place", c.Kind)
		}
		p := placed[c.Old.at.file]
		if p == nil {
			p = &placedRows{FileMatches: &delta.FileMatches{}}
			pos.Files[c.Old.at.file], placed[c.Old.at.file] = p.FileMatches, p
		}
		p.Target, p.Source = append(p.Target, c.Old.at.row), append(p.Source, int32(i))
		p.at = append(p.at, c.Old.at)
	}
	for _, p := range placed {
		sort.Sort(p)
		rows, err := batch.heldRows(ctx, p.at)
		if err != nil {
			return nil, err
		}
		p.Rows = rows
	}
	defer func() {
		for _, p := range placed {
			releaseRecords(p.Rows)
		}
	}()
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return nil, err
	}
	opts := s.mergeOptions(env, dst, snap, l, sourceVersion, watermark)
	opts.Source, opts.Positions = recs[:], pos
	return dst.Merge(ctx, opts)
}

// mergeSourceSchema is the schema of the MERGE source rows that scdSourceRecord builds:
// the data columns, valid_from, valid_to, is_current (in the dimension's types) and the
// action.
func mergeSourceSchema(snap *delta.Snapshot, l *scdLayout) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(l.data)+4)
	for _, f := range l.data {
		at, err := delta.ArrowType(f.Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: at, Nullable: true})
	}
	schema := snap.Schema()
	for _, name := range []string{l.from, l.to, l.curr} {
		at, err := delta.ArrowType(schema.Field(name).Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: schema.Field(name).Name, Type: at, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: scdActionColumn, Type: arrow.BinaryTypes.String})
	return arrow.NewSchema(fields, nil), nil
}

// mergeOptions is the MERGE that applies a batch's changes on snap (without its source
// and positions), with the batch txn and the new watermark (nil: unchanged).
func (s *SCD2Merge) mergeOptions(env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, sourceVersion int64, watermark *int64) delta.MergeOptions {
	on := make([]string, 0, len(l.spec.keys)+1)
	for _, k := range l.spec.keys {
		on = append(on, l.data[k].Name)
	}
	on = append(on, l.from)
	tx := dst.NewTransaction(snap, delta.TxOptions{})
	if watermark != nil {
		tx.SetTxn(s.watermarkID(), *watermark)
	}
	return delta.MergeOptions{
		On:       on,
		NullSafe: true,
		WhenMatched: []delta.MergeClause{
			{Cond: delta.Eq("source."+scdActionColumn, "delete"), Action: delta.MergeDelete},
			{Cond: delta.Eq("source."+scdActionColumn, "close"), Action: delta.MergeUpdate,
				Set: map[string]any{l.to: delta.Col("source." + l.to), l.curr: false}},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{
			{Cond: delta.Ne("source."+scdActionColumn, "delete"), Action: delta.MergeInsert},
		},
		Txn:     &delta.Txn{AppID: s.AppID(), Version: sourceVersion},
		Tx:      tx,
		Lineage: env.lineage(),
	}
}

// scdSourceRecord builds MERGE source rows for changes: the data columns, valid_from,
// valid_to, is_current and the action.
func scdSourceRecord(schema *arrow.Schema, l *scdLayout, batch *scdBatch, changes []scdChange) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, f := range b.Fields() {
		f.Reserve(len(changes))
	}
	n := len(l.data)
	for _, c := range changes {
		v := c.New
		if c.Kind == "delete" {
			v = c.Old
		}
		switch {
		case c.Kind == "close": // only valid_to and is_current change
			for j := range n + 1 {
				b.Field(j).AppendNull()
			}
		case c.quick:
			r := batch.evRec[c.ev]
			src, row, cols := batch.recs[r], int(batch.evRow[c.ev]), batch.cols[r]
			for j := range n {
				if err := appendFrom(b.Field(j), src.Column(cols[j]), row); err != nil {
					return nil, fmt.Errorf("column %s: %w", l.data[j].Name, err)
				}
			}
		default:
			for j, val := range v.Row {
				if err := appendValue(b.Field(j), val); err != nil {
					return nil, fmt.Errorf("column %s: %w", l.data[j].Name, err)
				}
			}
		}
		if c.Kind != "close" {
			if err := appendValue(b.Field(n), v.From); err != nil {
				return nil, err
			}
		}
		if err := appendValue(b.Field(n+1), v.To); err != nil {
			return nil, err
		}
		b.Field(n + 2).(*array.BooleanBuilder).Append(v.Current)
		b.Field(n + 3).(*array.StringBuilder).Append(c.Kind)
	}
	return b.NewRecordBatch(), nil
}

// placedRows are a file's matches with where the scan placed each target row; they
// sort by target row.
type placedRows struct {
	*delta.FileMatches
	at []dimRow
}

func (m *placedRows) Len() int           { return len(m.Target) }
func (m *placedRows) Less(i, j int) bool { return m.Target[i] < m.Target[j] }
func (m *placedRows) Swap(i, j int) {
	m.Target[i], m.Target[j] = m.Target[j], m.Target[i]
	m.Source[i], m.Source[j] = m.Source[j], m.Source[i]
	m.at[i], m.at[j] = m.at[j], m.at[i]
}

// heldRows gathers the kept rows of one file's matched versions, in their order, as
// records for FileMatches.Rows: nil when some row was not kept. Sorted by target row,
// a file's versions come in the order the scan kept them.
func (b *scdBatch) heldRows(ctx context.Context, at []dimRow) ([]arrow.RecordBatch, error) {
	for _, r := range at {
		if r.held == 0 {
			return nil, nil
		}
	}
	var out []arrow.RecordBatch
	var rows []int32
	flush := func(held int32) error {
		if len(rows) == 0 {
			return nil
		}
		g, err := delta.GatherRows(ctx, b.dimRows[held-1], rows)
		if err != nil {
			return err
		}
		out, rows = append(out, g), rows[:0]
		return nil
	}
	for i, r := range at {
		if i > 0 && r.held != at[i-1].held {
			if err := flush(at[i-1].held); err != nil {
				releaseRecords(out)
				return nil, err
			}
		}
		rows = append(rows, r.hrow)
	}
	if err := flush(at[len(at)-1].held); err != nil {
		releaseRecords(out)
		return nil, err
	}
	return out, nil
}

func releaseRecords(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}
