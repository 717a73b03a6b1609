package jobs

import (
	"context"
	"fmt"

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

// apply writes the fold's changes as one MERGE on (keys, valid_from), with the batch txn.
func (s *SCD2Merge) apply(ctx context.Context, env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, changes []scdChange, sourceVersion int64, watermark *int64) (*delta.MergeResult, error) {
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
	n := len(l.data)
	for _, c := range changes {
		v := c.New
		if c.Kind == "delete" {
			v = c.Old
		}
		for j, val := range v.Row {
			if err := appendValue(b.Field(j), val); err != nil {
				return nil, fmt.Errorf("column %s: %w", l.data[j].Name, err)
			}
		}
		if err := appendValue(b.Field(n), v.From); err != nil {
			return nil, err
		}
		if err := appendValue(b.Field(n+1), v.To); err != nil {
			return nil, err
		}
		b.Field(n + 2).(*array.BooleanBuilder).Append(v.Current)
		b.Field(n + 3).(*array.StringBuilder).Append(c.Kind)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	on := make([]string, 0, len(l.spec.keys)+1)
	for _, k := range l.spec.keys {
		on = append(on, l.data[k].Name)
	}
	on = append(on, l.from)
	var tx *delta.Transaction
	if watermark != nil {
		tx = dst.NewTransaction(snap, delta.TxOptions{})
		tx.SetTxn(s.watermarkID(), *watermark)
	}
	return dst.Merge(ctx, delta.MergeOptions{
		Source:   []arrow.RecordBatch{rec},
		On:       on,
		NullSafe: true,
		WhenMatched: []delta.MergeClause{
			{Cond: delta.Eq("source."+scdActionColumn, "delete"), Action: delta.MergeDelete},
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
