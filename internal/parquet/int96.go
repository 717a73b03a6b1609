package parquet

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Spark writes timestamps as INT96 (Julian day and nanoseconds of the day) unless told
// otherwise. pqarrow reads them as nanosecond timestamps, which end in 2262: a Spark
// dimension whose open versions end on 9999-12-31 would not read. Delta timestamps are
// microseconds, so Int96Reader reads flat INT96 columns as microseconds, as Spark does
// (no calendar rebase: days before 1582 are read as the proleptic Gregorian calendar).

// julianUnixEpoch is the Julian day of 1970-01-01.
const julianUnixEpoch = 2440588

const (
	microsPerDay  = 86400 * 1000 * 1000
	nanosPerDay96 = microsPerDay * 1000
)

// IsInt96 reports whether top-level field i of fr is a flat INT96 column (optional or
// required), which an Int96Reader reads.
func IsInt96(fr *pqarrow.FileReader, i int) bool {
	f := fr.Manifest.Fields[i]
	if !f.IsLeaf() {
		return false
	}
	col := fr.ParquetReader().MetaData().Schema.Column(f.ColIndex)
	return col.PhysicalType() == pq.Types.Int96 && col.MaxRepetitionLevel() == 0 && col.MaxDefinitionLevel() <= 1
}

// Int96Reader reads a flat INT96 column over some row groups, batch by batch, as
// microsecond timestamps (UTC): Spark's default timestamps, read as Spark reads them.
type Int96Reader struct {
	fr     *pqarrow.FileReader
	col    int   // leaf index
	rgs    []int // row groups to read, in order
	next   int   // index in rgs of the row group after cur's
	cur    *file.Int96ColumnChunkReader
	maxDef int16
	what   string
	vals   []pq.Int96
	defs   []int16
}

var int96Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Int96Type is the Arrow type an Int96Reader returns: microsecond timestamps in UTC.
func Int96Type() arrow.DataType { return int96Type }

// NewInt96Reader reads top-level field i of fr (IsInt96) over rowGroups, in order (nil:
// all); what names the column in errors.
func NewInt96Reader(fr *pqarrow.FileReader, i int, rowGroups []int, what string) *Int96Reader {
	if rowGroups == nil {
		rowGroups = AllRowGroups(fr)
	}
	col := fr.Manifest.Fields[i].ColIndex
	return &Int96Reader{fr: fr, col: col, rgs: rowGroups, what: what,
		maxDef: fr.ParquetReader().MetaData().Schema.Column(col).MaxDefinitionLevel()}
}

// Read returns the next n values (fewer at the end).
func (r *Int96Reader) Read(n int, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewTimestampBuilder(mem, int96Type)
	defer b.Release()
	b.Reserve(n)
	if cap(r.vals) < n {
		r.vals, r.defs = make([]pq.Int96, n), make([]int16, n)
	}
	for got := 0; got < n; {
		if r.cur == nil || !r.cur.HasNext() {
			if r.next >= len(r.rgs) {
				break
			}
			r.Close()
			cr, err := r.fr.ParquetReader().RowGroup(r.rgs[r.next]).Column(r.col)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.what, err)
			}
			r.next++
			r.cur = cr.(*file.Int96ColumnChunkReader)
			continue
		}
		want := n - got
		total, nvals, err := r.cur.ReadBatch(int64(want), r.vals[:want], r.defs[:want], nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.what, err)
		}
		if total == 0 {
			return nil, fmt.Errorf("%s: corrupt data file: a page yields no values", r.what)
		}
		v := 0
		for i := range int(total) {
			if r.maxDef > 0 && r.defs[i] < r.maxDef {
				b.AppendNull()
				continue
			}
			if v >= nvals {
				return nil, fmt.Errorf("%s: corrupt data file: fewer values than levels", r.what)
			}
			us, err := int96Micros(r.vals[v])
			if err != nil {
				return nil, fmt.Errorf("%s: corrupt data file: %w", r.what, err)
			}
			b.UnsafeAppend(arrow.Timestamp(us))
			v++
		}
		got += int(total)
	}
	return b.NewArray(), nil
}

// Close releases the open row group's pages.
func (r *Int96Reader) Close() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

// int96Micros converts an INT96 timestamp to microseconds since the epoch (nanoseconds
// truncated toward the past).
func int96Micros(v pq.Int96) (int64, error) {
	nanos := binary.LittleEndian.Uint64(v[:8])
	if nanos >= nanosPerDay96 {
		return 0, fmt.Errorf("INT96 timestamp with %d nanoseconds in a day", nanos)
	}
	days := int64(binary.LittleEndian.Uint32(v[8:])) - julianUnixEpoch
	if days > math.MaxInt64/microsPerDay-1 || days < math.MinInt64/microsPerDay+1 {
		return 0, fmt.Errorf("INT96 timestamp %d days from 1970 is outside the microsecond range", days)
	}
	return days*microsPerDay + int64(nanos/1000), nil
}
