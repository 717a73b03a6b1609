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
	source, column, err, record string
	value                       *string // nil: NULL
	// expectation names the row expectation the fact violated ("": a lookup missed).
	expectation string
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
	fr.quarantined = append(fr.quarantined, quarantinedFact{source: source, column: miss.column, value: &miss.value,
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
	q, err := openQuarantine(ctx, env, fr.s.cfg.QuarantineTable)
	if err != nil {
		return err
	}
	if v, ok := q.done(fr.s.QuarantineAppID()); ok && v >= srcVersion {
		return nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, q.schema)
	defer b.Release()
	now := arrow.Timestamp(env.Now().UnixMicro())
	for _, qf := range fr.quarantined {
		for i, f := range q.schema.Fields() {
			fb := b.Field(i)
			s, isString := fb.(*array.StringBuilder)
			switch {
			case f.Name == "source_file" && isString:
				s.Append(qf.source)
			case f.Name == "column" && isString:
				s.Append(qf.column)
			case f.Name == "value" && isString && qf.value != nil:
				s.Append(*qf.value)
			case f.Name == "error" && isString:
				s.Append(qf.err)
			case f.Name == "record" && isString:
				s.Append(qf.record)
			case f.Name == "expectation" && isString && qf.expectation != "":
				s.Append(qf.expectation)
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
	if err := q.append(ctx, env, rec, len(fr.quarantined), []quarantineTxn{{fr.s.QuarantineAppID(), srcVersion}}, "facts", res); err != nil {
		return err
	}
	res.RowsSkipped += int64(len(fr.quarantined))
	return nil
}
