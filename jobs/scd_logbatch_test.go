package jobs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// The log records a pass writes straight from its batch (logRecords) are the events the
// log's general path (logged, sorted and compacted, then loggedRecord) writes: the same
// rows in the same order, chunk after chunk, without the events of versions already
// recorded. Seeds from 20 have thousands of keys, placed in the log's order by radix
// (radixMinKeys lowered), their events digested in parts (digestPartEvents lowered).
func TestLogRecordsMatchLoggedEvents(t *testing.T) {
	defer func(n, m int) { radixMinKeys, digestPartEvents = n, m }(radixMinKeys, digestPartEvents)
	radixMinKeys, digestPartEvents = 64, 100
	col := func(name, typ string) *delta.StructField {
		return &delta.StructField{Name: name, Type: &delta.PrimitiveType{Name: typ}, Nullable: true}
	}
	dim := &delta.StructType{Fields: []*delta.StructField{col("id", delta.TypeLong), col("city", delta.TypeString),
		col("email", delta.TypeString), col("valid_from", delta.TypeTimestamp), col("valid_to", delta.TypeTimestamp),
		col("is_current", delta.TypeBoolean)}}
	s := NewSCD2Merge("dim", &SCD2Config{Keys: []string{"id"}, Track: []string{"city"}, Type1: []string{"email"}, Deletes: "close"})
	l, err := s.layout(dim)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range propertySeeds(26) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			b := newSCDBatch(l, true)
			defer b.Release()
			ord := int64(0)
			keys, rows := int64(40), 300
			if seed >= 20 {
				keys, rows = 5000, 4000
			}
			for range 1 + rng.IntN(4) {
				rec := randomEventRecord(t, rng, 1+rng.IntN(rows), keys, &ord)
				err := b.Add(context.Background(), rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			last := rng.Int64N(4) // versions 1..4 in the batch; those through last are recorded
			recorded := seed%3 != 0
			chunk := 1 + rng.IntN(64)

			want := b.logged()
			if recorded {
				want = slices.DeleteFunc(want, func(e loggedEvent) bool { return e.commit <= last })
			}
			sortLogged(want)
			want = slices.CompactFunc(want, func(a, b loggedEvent) bool { return string(a.key) == string(b.key) && a.eventFact == b.eventFact })
			var wantRows []string
			if len(want) > 0 {
				rec := loggedRecord(want)
				wantRows = recordRows(t, rec)
				rec.Release()
			}

			var got []string
			err := b.logRecords(chunk, chunk%3, func(commit int64) bool { return recorded && commit <= last }, func(rec arrow.RecordBatch) error {
				// A chunk ends after the key that fills it.
				if most := int64(chunk) + int64(slices.Max(b.count)); rec.NumRows() >= most {
					return fmt.Errorf("a record of %d rows (chunk %d)", rec.NumRows(), chunk)
				}
				got = append(got, recordRows(t, rec)...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, wantRows) {
				i := firstDifference(got, wantRows)
				t.Fatalf("%d rows logged, want %d; first difference at %d:\n got %s\nwant %s", len(got), len(wantRows), i, at(got, i), at(wantRows, i))
			}
		})
	}
}

// randomEventRecord makes a batch-form record of n change feed events of few keys
// (repeats, identical events, deletes of source rows, four source versions) of keys
// 0 to keys-1.
func randomEventRecord(t *testing.T, rng *rand.Rand, n int, keys int64, ord *int64) arrow.RecordBatch {
	t.Helper()
	mem := memory.DefaultAllocator
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "email", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	schema := arrow.NewSchema(append(fields, scdEventFields...), nil)
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for range n {
		del := rng.IntN(6) == 0
		rb.Field(0).(*array.Int64Builder).Append(rng.Int64N(keys))
		rb.Field(1).(*array.StringBuilder).Append([]string{"Oslo", "Lyon", "Pisa"}[rng.IntN(3)])
		if rng.IntN(4) == 0 {
			rb.Field(2).(*array.StringBuilder).AppendNull()
		} else {
			rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("m%d@x", rng.IntN(3)))
		}
		rb.Field(3).(*array.Int64Builder).Append(rng.Int64N(5))
		rb.Field(4).(*array.BooleanBuilder).Append(del)
		rb.Field(5).(*array.BooleanBuilder).Append(del && rng.IntN(2) == 0)
		rb.Field(6).(*array.Int64Builder).Append(rng.Int64N(5))
		rb.Field(7).(*array.Int64Builder).Append(1 + rng.Int64N(4))
		rb.Field(8).(*array.Int64Builder).Append(*ord)
		*ord++
	}
	return rb.NewRecordBatch()
}

// recordRows is each row of rec as text.
func recordRows(t *testing.T, rec arrow.RecordBatch) []string {
	t.Helper()
	out := make([]string, rec.NumRows())
	for i := range out {
		for c := range int(rec.NumCols()) {
			out[i] += rowtext.At(rec.Column(c), i).Text + "|"
		}
	}
	return out
}

// appendType1 writes strings and longs straight from their arrays: the bytes are those
// of the general encoding (each value read by keyed.Value, then appendValues), for every
// type, with nulls, after what dst held.
func TestAppendType1MatchesValues(t *testing.T) {
	col := func(name, typ string) *delta.StructField {
		return &delta.StructField{Name: name, Type: &delta.PrimitiveType{Name: typ}, Nullable: true}
	}
	dim := &delta.StructType{Fields: []*delta.StructField{col("id", delta.TypeLong), col("s", delta.TypeString),
		col("n", delta.TypeLong), col("i", delta.TypeInteger), col("f", delta.TypeDouble), col("ts", delta.TypeTimestamp),
		col("valid_from", delta.TypeTimestamp), col("valid_to", delta.TypeTimestamp), col("is_current", delta.TypeBoolean)}}
	s := NewSCD2Merge("dim", &SCD2Config{Keys: []string{"id"}, Type1: []string{"s", "n", "i", "f", "ts"}})
	l, err := s.layout(dim)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, {Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	for r := range 200 {
		rb.Field(0).(*array.Int64Builder).Append(int64(r))
		for c := 1; c < 6; c++ {
			if rng.IntN(4) == 0 {
				rb.Field(c).AppendNull()
				continue
			}
			switch b := rb.Field(c).(type) {
			case *array.StringBuilder:
				b.Append(strings.Repeat("é", rng.IntN(200)))
			case *array.Int64Builder:
				b.Append(rng.Int64() - rng.Int64())
			case *array.Int32Builder:
				b.Append(rng.Int32() - rng.Int32())
			case *array.Float64Builder:
				b.Append(rng.NormFloat64())
			case *array.TimestampBuilder:
				b.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
			}
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	cols, err := sourceColumns(schema, l)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]any, len(l.spec.type1))
	for r := range int(rec.NumRows()) {
		got, err := appendType1([]byte("before"), vals, l, rec, cols, r)
		if err != nil {
			t.Fatal(err)
		}
		var want []any
		for _, c := range l.spec.type1 {
			v, err := keyed.Value(rec.Column(cols[c]), r)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, v)
		}
		if w := appendValues([]byte("before"), want); !bytes.Equal(got, w) {
			t.Fatalf("row %d: %x, want %x", r, got, w)
		}
	}
}
