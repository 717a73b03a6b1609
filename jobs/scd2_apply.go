package jobs

import (
	"context"
	"fmt"
	"sort"

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
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, f := range b.Fields() {
		f.Reserve(len(changes))
	}
	n := len(l.data)
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	placed := map[string]*placedRows{}
	for i, c := range changes {
		if c.Old != nil {
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
	rec := b.NewRecordBatch()
	defer rec.Release()
	on := make([]string, 0, len(l.spec.keys)+1)
	for _, k := range l.spec.keys {
		on = append(on, l.data[k].Name)
	}
	on = append(on, l.from)
	tx := dst.NewTransaction(snap, delta.TxOptions{})
	if watermark != nil {
		tx.SetTxn(s.watermarkID(), *watermark)
	}
	return dst.Merge(ctx, delta.MergeOptions{
		Source:    []arrow.RecordBatch{rec},
		On:        on,
		NullSafe:  true,
		Positions: pos,
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
	})
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
		r.Release()
	}
}
