package jobs

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// A slice counts the bytes its rows span, as a copy of them would take; an array that
// is not a slice counts its buffers.
func TestArrayBytesOfSlices(t *testing.T) {
	mem := memory.DefaultAllocator
	sb := array.NewStringBuilder(mem)
	for i := range 1000 {
		if i%7 == 0 {
			sb.AppendNull()
		} else {
			sb.Append("0123456789")
		}
	}
	strs := sb.NewArray()
	defer strs.Release()
	ib := array.NewInt64Builder(mem)
	for i := range 1000 {
		ib.Append(int64(i))
	}
	ints := ib.NewArray()
	defer ints.Release()
	bb := array.NewBooleanBuilder(mem)
	for i := range 1000 {
		bb.Append(i%2 == 0)
	}
	bools := bb.NewArray()
	defer bools.Release()
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String})
	for i := range 1000 {
		db.(*array.BinaryDictionaryBuilder).AppendString([]string{"a", "b"}[i%2])
	}
	dict := db.NewArray()
	defer dict.Release()

	whole := func(a arrow.Array) int64 {
		var n int64
		for _, b := range a.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		return n
	}
	for _, a := range []arrow.Array{strs, ints, bools} {
		if got, want := keyed.ArrayBytes(a.Data()), whole(a); got > want {
			t.Errorf("%s: %d bytes, more than its buffers' %d", a.DataType(), got, want)
		}
	}
	// Rows 100..200 (a validity bitmap of 13 bytes where the array has one) of the
	// strings: 14 of them null (every 7th), the other 86 ten bytes.
	validity := func(a arrow.Array, n int64) int64 {
		if a.Data().Buffers()[0] == nil {
			return 0
		}
		return (n + 7) / 8
	}
	for _, c := range []struct {
		a        arrow.Array
		lo, hi   int64
		want     int64
		describe string
	}{
		{strs, 100, 200, validity(strs, 100) + 4*101 + 860, "a string slice: validity, offsets, its values"},
		{ints, 100, 200, validity(ints, 100) + 800, "an int64 slice"},
		{bools, 100, 200, validity(bools, 100) + 13, "a boolean slice"},
		{ints, 0, 0, 0, "an empty slice"},
	} {
		s := array.NewSlice(c.a, c.lo, c.hi)
		if got := keyed.ArrayBytes(s.Data()); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.describe, got, c.want)
		}
		s.Release()
	}
	// A dictionary array counts its indices and its dictionary.
	if got, want := keyed.ArrayBytes(dict.Data()), whole(dict)+keyed.ArrayBytes(dict.(*array.Dictionary).Dictionary().Data()); got != want {
		t.Errorf("dictionary: %d bytes, want %d", got, want)
	}
	// A record of slices of one long lineage column counts each slice's rows once.
	l := lineageColumns{file: "/landing/a/very/long/path/of/a/source/file.csv"}
	defer l.release()
	var total int64
	for range 10 {
		src := l.sourceFile(1000)
		part := array.NewSlice(src, 0, 100)
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "source_file", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{part}, 100)
		total += keyed.RecordBytes(rec)
		rec.Release()
		part.Release()
		src.Release()
	}
	if want := 10 * (validity(l.src, 100) + 4*101 + int64(100*len(l.file))); total != want {
		t.Errorf("ten 100-row slices of a file's source_file column: %d bytes, want %d", total, want)
	}
}
