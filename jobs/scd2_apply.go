package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
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

// mergeSourceSchema is the schema of the MERGE source rows that scdSourceRecord builds:
// the data columns, valid_from, valid_to, is_current (in the dimension's types), the
// columns.inferred flag when there is one, and the action.
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
	names := []string{l.from, l.to, l.curr}
	if l.inferred != "" {
		names = append(names, l.inferred) // false on every row the merge writes
	}
	for _, name := range names {
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
			{Cond: expr.Eq("source."+scdActionColumn, "delete"), Action: delta.MergeDelete},
			{Cond: expr.Eq("source."+scdActionColumn, "close"), Action: delta.MergeUpdate,
				Set: map[string]any{l.to: expr.Col("source." + l.to), l.curr: false}},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{
			{Cond: expr.Ne("source."+scdActionColumn, "delete"), Action: delta.MergeInsert},
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
		if v.To == l.spec.end && l.spec.endNull {
			b.Field(n + 1).AppendNull() // open_end: null
		} else if err := appendValue(b.Field(n+1), v.To); err != nil {
			return nil, err
		}
		b.Field(n + 2).(*array.BooleanBuilder).Append(v.Current)
		act := n + 3
		if l.inferred != "" {
			b.Field(act).(*array.BooleanBuilder).Append(false)
			act++
		}
		b.Field(act).(*array.StringBuilder).Append(c.Kind)
	}
	return b.NewRecordBatch(), nil
}

// Insert orders: batch keys (by their first event), then late keys, then keys a
// snapshot source lost (by key hash), as a MERGE of the whole batch would insert them
// (its changes in key order).
const (
	ordLate    = 1 << 61
	ordMissing = 2 << 61
)

// emit gives a pass's changes to the sink: those of stored versions matched with the
// dimension rows they change (their places, and the rows the scan kept), the new
// versions with their order in the whole batch. The two halves of the MERGE source are
// built at once.
func (s *SCD2Merge) emit(ctx context.Context, sink *keyed.Sink, b *scdBatch, l *scdLayout, changes []scdChange, late []bool) error {
	var matched, inserts []scdChange
	var ords, ords2 []int64
	var key []byte
	for _, c := range changes {
		if c.Old != nil {
			if !c.Old.at.placed {
				return fmt.Errorf("internal error: a %s of a stored version that the scan did not place", c.Kind)
			}
			if c.Old.at.held == 0 {
				return fmt.Errorf("internal error: a changed row at %v was not kept", c.Old.at.place)
			}
			matched = append(matched, c)
			continue
		}
		var err error
		if c.quick {
			r := b.evRec[c.ev]
			key, err = keyed.AppendKey(key[:0], b.recs[r], l.keyColumns(b.cols[r]), int(b.evRow[c.ev]))
		} else {
			key = keyed.AppendRowKey(key[:0], c.New.Row, l.spec.keys)
		}
		if err != nil {
			return err
		}
		ord, ord2 := int64(ordMissing), keyed.Hash(key) // a key a snapshot source lost (sortByKeyHash)
		if id, ok := b.keys.Lookup(key); ok {
			ord, ord2 = b.keyOrd[id], 0
			if late[id] {
				ord |= ordLate
			}
		}
		inserts = append(inserts, c)
		ords, ords2 = append(ords, ord), append(ords2, ord2)
	}
	schema := sink.Source()
	var recs [2]arrow.RecordBatch
	var errs [2]error
	for _, r := range b.recs { // (both gathers ask the batch's columns for them)
		arrowx.SettleNullCounts(r.Columns())
	}
	var wg sync.WaitGroup
	for k, part := range [][]scdChange{matched, inserts} {
		wg.Go(func() { recs[k], errs[k] = scdSourceRecord(schema, l, b, part) })
	}
	wg.Wait()
	defer arrowx.ReleaseRecords(recs[:])
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return err
	}
	places, at := make([]keyed.Place, len(matched)), make([]keyed.Ref, len(matched))
	for i, c := range matched {
		places[i], at[i] = c.Old.at.place, keyed.Ref{Rec: c.Old.at.held - 1, Row: c.Old.at.hrow}
	}
	if err := sink.Matched(ctx, recs[0], keyed.Rows{Recs: b.dimRows, At: at}, places); err != nil {
		return err
	}
	return sink.Inserts(ctx, recs[1], ords, ords2)
}
