package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// UnknownMemberFrom is the valid_from of an "Unknown" member row: 1900-01-01 00:00:00
// UTC in microseconds since the epoch (its valid_to is the open end of the dimension's
// current versions: 9999-12-31, or its scd2_merge's open_end).
const UnknownMemberFrom int64 = -2208988800000000

// unknownMemberAppID is the txn appId, in the dimension, of the commit that created the
// unknown member row with surrogate key key: every fact_load with that key shares it, so
// the row is created once.
func unknownMemberAppID(key int64) string {
	return "fact_load:unknown_member:" + strconv.FormatInt(key, 10)
}

// isMemberRow reports whether a dimension row is an "Unknown" member row (to the SCD2
// merge, not a version of any business key): its business key columns (cols of
// rec) are all NULL. An scd2_merge never merges a NULL key, so only fact_load writes
// such rows.
func isMemberRow(rec arrow.RecordBatch, cols []int, i int) bool {
	for _, c := range cols {
		if !rec.Column(c).IsNull(i) {
			return false
		}
	}
	return len(cols) > 0
}

// ensureUnknownMember creates the lookup's "Unknown" member row in its dimension once:
// surrogate key the lookup's unknown key, business key and attributes NULL, valid from
// UnknownMemberFrom to the open end, current. The commit carries the txn
// unknownMemberAppID(key), so a rerun, a crash after it or a concurrent fact_load finds
// it done. It returns whether it committed (d.snap then is the dimension after it).
func (d *factDim) ensureUnknownMember(ctx context.Context, env *Env) (bool, error) {
	appID := unknownMemberAppID(d.lookup.unknownKey())
	if _, done := d.snap.TxnVersion(appID); done {
		return false, nil
	}
	rec, err := d.unknownMemberRow()
	if err != nil {
		return false, fmt.Errorf("dimension %s: unknown member row: %w", d.decl.Name, err)
	}
	defer rec.Release()
	for attempt := 0; attempt < delta.DefaultIdentityAttempts; attempt++ {
		w, err := d.snap.NewDataWriter(delta.WriteOptions{})
		if err != nil {
			return false, err
		}
		if err := w.Write(ctx, rec); err != nil {
			w.Abort()
			return false, fmt.Errorf("dimension %s: write unknown member row: %w", d.decl.Name, err)
		}
		adds, err := w.Close(ctx)
		if err != nil {
			return false, fmt.Errorf("dimension %s: write unknown member row: %w", d.decl.Name, err)
		}
		tx := d.tbl.NewTransaction(d.snap, delta.TxOptions{Operation: "WRITE", Lineage: env.lineage(),
			OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
			OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": 1}})
		tx.AddFiles(adds...)
		tx.SetTxn(appID, 1)
		_, err = tx.Commit(ctx)
		if err == nil || delta.CommittedBy(err, appID, 1) {
			committed := err == nil
			if d.snap, err = d.tbl.Snapshot(ctx); err != nil {
				return false, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
			}
			return committed, nil
		}
		var ce *delta.ConflictError
		if !errors.As(err, &ce) {
			return false, fmt.Errorf("dimension %s: write unknown member row: %w", d.decl.Name, err)
		}
		if d.snap, err = d.tbl.Snapshot(ctx); err != nil {
			return false, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		if _, done := d.snap.TxnVersion(appID); done {
			return false, nil
		}
	}
	return false, fmt.Errorf("dimension %s: write unknown member row: too many concurrent commits", d.decl.Name)
}

// unknownMemberRow builds the member row in the dimension's schema.
func (d *factDim) unknownMemberRow() (arrow.RecordBatch, error) {
	schema := d.snap.Schema()
	as, err := delta.ArrowSchema(schema)
	if err != nil {
		return nil, err
	}
	curr, inferred := d.lookup.DimensionColumns().IsCurrent, d.lookup.DimensionColumns().Inferred
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for j, f := range as.Fields() {
		fb := b.Field(j)
		var err error
		switch {
		case strings.EqualFold(f.Name, d.sk):
			err = appendMemberValue(fb, f.Name, d.lookup.unknownKey())
		case strings.EqualFold(f.Name, d.from):
			err = appendMemberValue(fb, f.Name, UnknownMemberFrom)
		case strings.EqualFold(f.Name, d.to) && d.endNull:
			fb.AppendNull() // the dimension's open_end: null
		case strings.EqualFold(f.Name, d.to):
			err = appendMemberValue(fb, f.Name, d.end)
		case strings.EqualFold(f.Name, curr), inferred != "" && strings.EqualFold(f.Name, inferred):
			if bb, ok := fb.(*array.BooleanBuilder); ok {
				bb.Append(strings.EqualFold(f.Name, curr)) // current; no placeholder
			} else {
				err = fmt.Errorf("column %s is %s; expected boolean", f.Name, f.Type)
			}
		case !f.Nullable:
			err = fmt.Errorf("column %s is declared nullable: false, but the unknown member row holds NULL there (its business key and attributes are NULL); declare it nullable, or use missing: fail or quarantine", f.Name)
		default:
			fb.AppendNull()
		}
		if err != nil {
			return nil, err
		}
	}
	return b.NewRecordBatch(), nil
}

// appendMemberValue appends a key or a time given in microseconds (v) to a builder of
// an integer, timestamp or date column (a date takes v's day).
func appendMemberValue(fb array.Builder, name string, v int64) error {
	switch fb.(type) {
	case *array.Int64Builder, *array.Int32Builder, *array.TimestampBuilder:
		return appendValue(fb, v)
	case *array.Date32Builder:
		return appendValue(fb, v/86_400_000_000)
	}
	return fmt.Errorf("column %s is %s; expected long, timestamp or date", name, fb.Type())
}
