package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	// version is the source version the fact came from (source's "@vN").
	version int64
}

// sourceVersion is the version N of a fact's origin "TABLE@vN" (as the load names
// them), or -1.
func sourceVersion(origin string) int64 {
	i := strings.LastIndex(origin, "@v")
	if i < 0 {
		return -1
	}
	v, err := strconv.ParseInt(origin[i+2:], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// newFactKeys looks up a new fact's keys; a fact a missing: quarantine lookup finds
// no version for is set aside for the quarantine table, and del says its fact (an
// earlier version of it, if loaded) leaves the fact table.
func (fr *factRun) newFactKeys(rec arrow.RecordBatch, kc []int, r int, source string) (sks []int64, del bool, err error) {
	sks, err = fr.keysFor(rec, kc, r)
	fr.lastSource = source
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
	fr.quarantined = append(fr.quarantined, quarantinedFact{source: source, version: sourceVersion(source), column: miss.column, value: &miss.value,
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
// the two (or after a conflict) reads those facts again, maybe with those of later
// source versions, and writes only the facts of versions after the txn's: none twice.
func (fr *factRun) quarantine(ctx context.Context, env *Env, srcVersion int64, res *Result) error {
	if len(fr.quarantined) == 0 {
		return nil
	}
	q, err := openQuarantine(ctx, env, fr.s.cfg.QuarantineTable)
	if err != nil {
		return err
	}
	done, _ := q.done(fr.s.QuarantineAppID())
	if done >= srcVersion {
		return nil
	}
	var pending []quarantinedFact
	for _, qf := range fr.quarantined {
		if qf.version < 0 || qf.version > done {
			pending = append(pending, qf)
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, q.schema)
	defer b.Release()
	now := arrow.Timestamp(env.Now().UnixMicro())
	for _, qf := range pending {
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
	if err := q.append(ctx, env, rec, len(pending), []quarantineTxn{{fr.s.QuarantineAppID(), srcVersion}}, "facts", res); err != nil {
		return err
	}
	res.RowsSkipped += int64(len(pending))
	return nil
}

// judge runs the row checks on a batch of facts: warn and fail checks judge every fact
// written (not the deletes); drop and quarantine checks judge the new facts only (a
// re-keyed fact's columns are those it was loaded with, but for the lookups' keys,
// which those checks may not read). A new fact they leave out leaves the fact table:
// the MERGE deletes its earlier version, if loaded, as a missing: quarantine lookup's
// miss does, so the table holds no fact that violates them and re-keying meets none.
func (fr *factRun) judge(rec arrow.RecordBatch, origin func(i int) string) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	dels := rec.Column(len(fr.keyOf)).(*array.Boolean)
	written, movable := make([]bool, n), make([]bool, n)
	for i := range written {
		written[i] = !dels.Value(i)
		movable[i] = written[i] && origin(i) != ""
	}
	at := func(i int) string {
		if o := origin(i); o != "" {
			return fmt.Sprintf("a fact from %s (key %s)", o, keyText(rec, fr.keyIdx, i))
		}
		return fmt.Sprintf("a fact of %s re-keyed (key %s)", fr.s.cfg.Target, keyText(rec, fr.keyIdx, i))
	}
	keep, bad, err := fr.checks.judge(rec, rowSite{at: at, subject: written, movable: movable})
	if err != nil {
		return nil, err
	}
	for _, b := range bad {
		q := quarantinedFact{source: origin(b.row), version: sourceVersion(origin(b.row)), column: b.err.Column, err: b.err.Error(), record: b.err.Record, expectation: b.expectation}
		if idx := rec.Schema().FieldIndices(b.err.Column); len(idx) == 1 && rec.Column(idx[0]).IsValid(b.row) {
			v := b.err.Value
			q.value = &v
		}
		fr.quarantined = append(fr.quarantined, q)
	}
	if keep == nil {
		rec.Retain()
		return rec, nil
	}
	for _, k := range keep {
		if !k {
			fr.dropped++
		}
	}
	fr.dropped -= int64(len(bad)) // (counted as quarantined)
	if fr.w != nil {              // an append: the fact table holds no earlier version to delete
		parts, err := keptParts(rec, keep)
		if err != nil || len(parts) == 1 {
			if err != nil {
				return nil, err
			}
			return parts[0], nil
		}
		return rec.NewSlice(0, 0), nil
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(dels.Value(i) || !keep[i])
	}
	del := b.NewArray()
	defer del.Release()
	cols := slices.Clone(rec.Columns())
	cols[len(fr.keyOf)] = del
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}
