package arrowx

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ReleaseArrays releases each array that is not nil.
func ReleaseArrays(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// SettleNullCounts counts the nulls that arrays (their children too) have left unknown
// (a slice's), so that arrays shared by goroutines are only read: arrow-go counts them
// on the first NullN, writing the count into the data every array over it shares.
func SettleNullCounts(arrs []arrow.Array) {
	var settle func(d arrow.ArrayData)
	settle = func(d arrow.ArrayData) {
		if d.NullN() == array.UnknownNullCount {
			a := array.MakeFromData(d)
			a.NullN()
			a.Release()
		}
		for _, c := range d.Children() {
			settle(c)
		}
	}
	for _, a := range arrs {
		if a != nil {
			settle(a.Data())
		}
	}
}

// ReleaseRecords releases each record that is not nil.
func ReleaseRecords(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// Concat returns the rows of recs (one schema, at least one record) as one record,
// which the caller releases: recs[0] itself, retained, when it is the only one.
func Concat(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			ReleaseArrays(cols[:i])
			return nil, err
		}
		cols[i] = c
	}
	rec := array.NewRecordBatch(schema, cols, n)
	ReleaseArrays(cols)
	return rec, nil
}

// IntGetter returns a reader of arr's values as int64 for the signed integer types and
// the unsigned ones that fit (false for other types).
func IntGetter(arr arrow.Array) (func(int) int64, bool) {
	switch a := arr.(type) {
	case *array.Int64:
		return func(i int) int64 { return a.Value(i) }, true
	case *array.Int32:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Int16:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Int8:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Uint32:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Uint16:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	case *array.Uint8:
		return func(i int) int64 { return int64(a.Value(i)) }, true
	}
	return nil, false
}
