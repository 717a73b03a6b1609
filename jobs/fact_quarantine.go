package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// factMiss is a new fact that a missing: quarantine lookup found no version for.
type factMiss struct {
	lookup        int
	column, value string
	msg           string
}

func (m *factMiss) Error() string { return m.msg }

// quarantinedFact is a fact on its way to the quarantine table.
type quarantinedFact struct {
	source, column, value, err, record string
}

// newFactKeys looks up a new fact's keys; a fact a missing: quarantine lookup finds
// no version for is set aside for the quarantine table, and del says its fact (an
// earlier version of it, if loaded) leaves the fact table.
func (fr *factRun) newFactKeys(rec arrow.RecordBatch, kc []int, r int, source string) (sks []int64, del bool, err error) {
	sks, err = fr.keysFor(rec, kc, r)
	var miss *factMiss
	if !errors.As(err, &miss) {
		if err == nil {
			fr.tally()
		}
		return sks, false, err
	}
	fr.counts[miss.lookup][2]++
	fields := map[string]any{}
	for c, f := range rec.Schema().Fields() {
		if f.Name == delta.ChangeTypeColumn || f.Name == delta.CommitVersionColumn || f.Name == delta.CommitTimestampColumn {
			continue
		}
		if col := rec.Column(c); col.IsNull(r) {
			fields[f.Name] = nil
		} else {
			fields[f.Name] = col.ValueStr(r)
		}
	}
	record, _ := json.Marshal(fields)
	fr.quarantined = append(fr.quarantined, quarantinedFact{source: source, column: miss.column, value: miss.value,
		err: fmt.Sprintf("fact %s: %s (lookups[%d] has missing: quarantine)", keyText(rec, kc, r), miss.msg, miss.lookup), record: string(record)})
	return nil, true, nil
}

// QuarantineAppID is the txn appId under which a fact_load records, in its quarantine
// table, the last source version whose facts it quarantined.
func (s *FactLoad) QuarantineAppID() string {
	return "fact_load-quarantine:" + s.cfg.Target + ":" + s.cfg.Source
}

// quarantine appends the run's quarantined facts to the quarantine table with the
// source version's txn, before the fact table's commit: a rerun after a crash between
// the two finds them written and writes them no second time.
func (fr *factRun) quarantine(ctx context.Context, env *Env, srcVersion int64, res *Result) error {
	if len(fr.quarantined) == 0 {
		return nil
	}
	decl, err := env.declared(fr.s.cfg.QuarantineTable)
	if err != nil {
		return err
	}
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("quarantine table %s: %w", decl.Name, err)
	}
	if v, ok := snap.TxnVersion(fr.s.QuarantineAppID()); ok && v >= srcVersion {
		return nil
	}
	schema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	now := arrow.Timestamp(env.Now().UnixMicro())
	for _, q := range fr.quarantined {
		for i, f := range schema.Fields() {
			fb := b.Field(i)
			s, isString := fb.(*array.StringBuilder)
			switch {
			case f.Name == "source_file" && isString:
				s.Append(q.source)
			case f.Name == "column" && isString:
				s.Append(q.column)
			case f.Name == "value" && isString:
				s.Append(q.value)
			case f.Name == "error" && isString:
				s.Append(q.err)
			case f.Name == "record" && isString:
				s.Append(q.record)
			case f.Name == "load_timestamp":
				if tb, ok := fb.(*array.TimestampBuilder); ok {
					tb.Append(now)
					continue
				}
				fb.AppendNull()
			default:
				fb.AppendNull()
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		return fmt.Errorf("write quarantine %s: %w", decl.Name, err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": int64(len(fr.quarantined))},
		Lineage:             env.lineage(),
	})
	tx.AddFiles(adds...)
	tx.SetTxn(fr.s.QuarantineAppID(), srcVersion)
	v, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit quarantine %s: %w", decl.Name, err)
	}
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: v})
	res.RowsSkipped += int64(len(fr.quarantined))
	res.Notes = append(res.Notes, fmt.Sprintf("quarantined %d facts in %s", len(fr.quarantined), decl.Name))
	return nil
}
