package jobs

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// markDiffering finds exactly the rows whose values differ as text (NULL-safe), for
// each type it compares as values and for one it compares as text.
func TestMarkDiffering(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	types := []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32,
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, arrow.FixedWidthTypes.Date32,
		arrow.FixedWidthTypes.Boolean, &arrow.Decimal128Type{Precision: 10, Scale: 2}, arrow.PrimitiveTypes.Float64}
	for _, dt := range types {
		const n = 500
		build := func() arrow.Array {
			b := array.NewBuilder(memory.DefaultAllocator, dt)
			defer b.Release()
			for range n {
				if rng.IntN(5) == 0 {
					b.AppendNull()
					continue
				}
				if err := b.AppendValueFromString(valueText(dt, rng.IntN(3))); err != nil {
					t.Fatal(err)
				}
			}
			return b.NewArray()
		}
		sc, tc := build(), build()
		got := make([]bool, n)
		got[0] = true // (a row marked already stays marked)
		markDiffering(sc, tc, got)
		for r := range n {
			sn, tn := sc.IsNull(r), tc.IsNull(r)
			want := r == 0 || sn != tn || !sn && sc.ValueStr(r) != tc.ValueStr(r)
			if got[r] != want {
				t.Errorf("%s row %d: %s against %s: differ %v, want %v", dt, r, sc.ValueStr(r), tc.ValueStr(r), got[r], want)
			}
		}
		sc.Release()
		tc.Release()
	}
}

// valueText is the i-th of three values of dt, as text.
func valueText(dt arrow.DataType, i int) string {
	switch dt.ID() {
	case arrow.STRING:
		return fmt.Sprint("v", i)
	case arrow.TIMESTAMP:
		return fmt.Sprintf("2026-01-0%dT00:00:00Z", i+1)
	case arrow.DATE32:
		return fmt.Sprintf("2026-01-0%d", i+1)
	case arrow.BOOL:
		return fmt.Sprint(i%2 == 0)
	case arrow.DECIMAL128:
		return fmt.Sprintf("%d.25", i)
	}
	return fmt.Sprint(i)
}
