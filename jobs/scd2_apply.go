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

// dimRows scans the dimension (filtered to keys when the key is one column and keys is
// not nil) and calls fn with each row as an scdVersion.
func (s *SCD2Merge) dimRows(ctx context.Context, snap *delta.Snapshot, l *scdLayout, keys []any, fn func(v scdVersion) error) error {
	opts := delta.ScanOptions{}
	if keys != nil && len(l.spec.keys) == 1 {
		if len(keys) == 0 {
			return nil
		}
		opts.Filter = delta.In(l.data[l.spec.keys[0]].Name, keys...)
	}
	sc, err := snap.Scan(ctx, opts)
	if err != nil {
		return err
	}
	defer sc.Release()
	synthetic := int64(0)
	for sc.Next() {
		rec := sc.RecordBatch()
		cols, err := sourceColumns(rec.Schema(), l)
		if err != nil {
			return err
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		from, to, curr := rec.Column(idx(l.from)), rec.Column(idx(l.to)), rec.Column(idx(l.curr)).(*array.Boolean)
		var sk *array.Int64
		if l.sk != "" {
			sk = rec.Column(idx(l.sk)).(*array.Int64)
		}
		for i := range int(rec.NumRows()) {
			row, err := sourceRow(rec, l, i, cols)
			if err != nil {
				return err
			}
			v := scdVersion{Row: row, Current: !curr.IsNull(i) && curr.Value(i)}
			v.From, _ = seqValue(from, i)
			v.To, _ = seqValue(to, i)
			if sk != nil && !sk.IsNull(i) {
				v.SK = sk.Value(i)
			} else {
				synthetic--
				v.SK = synthetic
			}
			if l.spec.deletes == "tombstone" {
				v.Tombstone = true
				for j := range row {
					if !isKeyIndex(l.spec.keys, j) && row[j] != nil {
						v.Tombstone = false
					}
				}
			}
			if err := fn(v); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

func isKeyIndex(keys []int, j int) bool {
	for _, k := range keys {
		if k == j {
			return true
		}
	}
	return false
}

// readVersions loads the stored versions of the keys that have events.
func (s *SCD2Merge) readVersions(ctx context.Context, snap *delta.Snapshot, l *scdLayout, events map[string][]scdEvent) (map[string][]scdVersion, error) {
	var keys []any
	if len(l.spec.keys) == 1 {
		keys = make([]any, 0, len(events))
		for _, evs := range events {
			keys = append(keys, evs[0].row[l.spec.keys[0]])
		}
	}
	out := map[string][]scdVersion{}
	err := s.dimRows(ctx, snap, l, keys, func(v scdVersion) error {
		k := keyString(v.Row, l.spec.keys)
		if _, ok := events[k]; ok {
			out[k] = append(out[k], v)
		}
		return nil
	})
	return out, err
}

// snapshotDeletes adds a delete event at seq for every current dimension key the source
// snapshot no longer has.
func (s *SCD2Merge) snapshotDeletes(ctx context.Context, snap *delta.Snapshot, l *scdLayout, events map[string][]scdEvent, seq int64, add func(scdEvent)) error {
	return s.dimRows(ctx, snap, l, nil, func(v scdVersion) error {
		if !v.Current || v.Tombstone {
			return nil
		}
		if _, ok := events[keyString(v.Row, l.spec.keys)]; !ok {
			add(scdEvent{seq: seq, delete: true, row: v.Row})
		}
		return nil
	})
}

// apply writes the fold's changes as one MERGE on (keys, valid_from), with the batch txn.
func (s *SCD2Merge) apply(ctx context.Context, env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, changes []scdChange, sourceVersion int64) (*delta.MergeResult, error) {
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
		Lineage: env.lineage(),
	})
}
