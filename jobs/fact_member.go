package jobs

import (
	"context"
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
	mb, err := d.newMemberBuilder()
	if err != nil {
		return nil, err
	}
	defer mb.b.Release()
	sk := d.lookup.unknownKey()
	if err := mb.add(nil, nil, 0, &sk, UnknownMemberFrom, false); err != nil {
		return nil, err
	}
	return mb.b.NewRecordBatch(), nil
}

// memberBuilder builds the rows fact_load adds to a dimension, in its schema: the
// "Unknown" member and inferred members' placeholders.
type memberBuilder struct {
	d *factDim
	b *array.RecordBuilder
	// keyOf is, per dimension column, its index among the lookup's business key
	// columns (d.dimCols; -1: none).
	keyOf []int
}

func (d *factDim) newMemberBuilder() (*memberBuilder, error) {
	as, err := delta.ArrowSchema(d.snap.Schema())
	if err != nil {
		return nil, err
	}
	mb := &memberBuilder{d: d, b: array.NewRecordBuilder(memory.DefaultAllocator, as), keyOf: make([]int, len(as.Fields()))}
	for j, fld := range as.Fields() {
		mb.keyOf[j] = slices.IndexFunc(d.dimCols, func(c string) bool { return strings.EqualFold(c, fld.Name) })
	}
	return mb, nil
}

// add appends a member row: the business key of row r of rec (its columns cols, in the
// order of d.dimCols; rec nil: NULL, the unknown member), surrogate key sk (nil: NULL,
// for the identity column to give at the commit), valid from from to the open end,
// current, attributes NULL, and the dimension's columns.inferred set to inferred.
func (mb *memberBuilder) add(rec arrow.RecordBatch, cols []int, r int, sk *int64, from int64, inferred bool) error {
	d := mb.d
	dc := d.lookup.DimensionColumns()
	what := "the unknown member row holds NULL there (its business key and attributes are NULL); declare it nullable, or use missing: fail or quarantine"
	if inferred {
		what = "an inferred member holds NULL there (its attributes are not known yet); declare it nullable"
	}
	for j, f := range mb.b.Schema().Fields() {
		fb := mb.b.Field(j)
		var err error
		switch {
		case mb.keyOf[j] >= 0 && rec != nil:
			err = appendFrom(fb, rec.Column(cols[mb.keyOf[j]]), r)
		case strings.EqualFold(f.Name, d.sk) && sk != nil:
			err = appendMemberValue(fb, f.Name, *sk)
		case strings.EqualFold(f.Name, d.sk):
			fb.AppendNull() // a new identity value, given at the commit
		case strings.EqualFold(f.Name, d.from):
			err = appendMemberValue(fb, f.Name, from)
		case strings.EqualFold(f.Name, d.to) && d.endNull:
			fb.AppendNull() // the dimension's open_end: null
		case strings.EqualFold(f.Name, d.to):
			err = appendMemberValue(fb, f.Name, d.end)
		case strings.EqualFold(f.Name, dc.IsCurrent), dc.Inferred != "" && strings.EqualFold(f.Name, dc.Inferred):
			if bb, ok := fb.(*array.BooleanBuilder); ok {
				bb.Append(strings.EqualFold(f.Name, dc.IsCurrent) || inferred)
			} else {
				err = fmt.Errorf("column %s is %s; expected boolean", f.Name, f.Type)
			}
		case !f.Nullable:
			err = fmt.Errorf("column %s is declared nullable: false, but %s", f.Name, what)
		default:
			fb.AppendNull()
		}
		if err != nil {
			return err
		}
	}
	return nil
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
