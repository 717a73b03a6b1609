package decode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// benchRows is the size of the generated file: the ingest benchmark's shape (string id,
// string key, decimal(10,2), UTC timestamp, nullable string).
const benchRows = 1_000_000

var benchData = sync.OnceValue(func() []byte { return genBench(false) })

// benchDataQuoted has every string field quoted, as many exporters write them.
var benchDataQuoted = sync.OnceValue(func() []byte { return genBench(true) })

func genBench(quoted bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.Grow(benchRows * 80)
	b.WriteString("transaction_id,customer_key,amount,event_time,note\n")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range benchRows {
		ts := time.UnixMicro(t0 + rng.Int64N(90*86400e6)).UTC()
		if quoted {
			fmt.Fprintf(&b, "\"TX-%09d\",\"CUST-%06d\",%d.%02d,%s,", i, rng.IntN(200000), rng.IntN(100000), rng.IntN(100),
				ts.Format("2006-01-02T15:04:05.000000Z"))
		} else {
			fmt.Fprintf(&b, "TX-%09d,CUST-%06d,%d.%02d,%s,", i, rng.IntN(200000), rng.IntN(100000), rng.IntN(100),
				ts.Format("2006-01-02T15:04:05.000000Z"))
		}
		if rng.IntN(4) != 0 {
			if quoted {
				fmt.Fprintf(&b, "\"note, %d\"", rng.IntN(1000))
			} else {
				fmt.Fprintf(&b, "note %d", rng.IntN(1000))
			}
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func benchSchema(tb testing.TB) Options {
	return Options{Format: CSV, Schema: schema(tb, "transaction_id string!", "customer_key string!", "amount decimal(10,2)!",
		"event_time timestamp!", "note string")}
}

func BenchmarkCSVDecode(b *testing.B) {
	for _, bc := range []struct {
		name string
		data func() []byte
		par  int
		line string // Options.LineColumn
	}{{"par1", benchData, 1, ""}, {"par2", benchData, 2, ""}, {"quoted/par1", benchDataQuoted, 1, ""}, {"quoted/par2", benchDataQuoted, 2, ""},
		{"line/par1", benchData, 1, "source_line"}} {
		data, par := bc.data(), bc.par
		b.Run(bc.name, func(b *testing.B) {
			opts := benchSchema(b)
			opts.Parallelism, opts.LineColumn = par, bc.line
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				r, err := NewReader(context.Background(), bytes.NewReader(data), "bench.csv", opts)
				if err != nil {
					b.Fatal(err)
				}
				for r.Next() {
				}
				if r.Err() != nil || r.Rows() != benchRows {
					b.Fatalf("rows %d, err %v", r.Rows(), r.Err())
				}
				r.Release()
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(benchRows)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
		})
	}
}

// BenchmarkArrowCSVReader is arrow-go's CSV reader on the same data and schema, for
// comparison.
func BenchmarkArrowCSVReader(b *testing.B) {
	data := benchData()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "transaction_id", Type: arrow.BinaryTypes.String},
		{Name: "customer_key", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
		{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		r := csv.NewReader(bytes.NewReader(data), sch, csv.WithHeader(true), csv.WithChunk(DefaultBatchSize),
			csv.WithNullReader(true, ""), csv.WithAllocator(memory.DefaultAllocator))
		n := int64(0)
		for r.Next() {
			n += r.RecordBatch().NumRows()
		}
		if r.Err() != nil || n != benchRows {
			b.Fatalf("rows %d, err %v", n, r.Err())
		}
		r.Release()
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(benchRows)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
}

// cpuTime is the process's user+system CPU time: on a shared machine, rows per CPU
// second says more about the decoder than rows per wall-clock second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCSVToParquet is the decoder feeding pqarrow's writer (decimals stored as
// integers, no dictionary, snappy), to io.Discard: an upper bound for the ingest stage
// before Delta's log and the object store.
func BenchmarkCSVToParquet(b *testing.B) {
	data := benchData()
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("par%d", par), func(b *testing.B) {
			opts := benchSchema(b)
			opts.Parallelism = par
			props := parquet.NewWriterProperties(parquet.WithStoreDecimalAsInteger(true),
				parquet.WithDictionaryDefault(false), parquet.WithCompression(compress.Codecs.Snappy))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				r, err := NewReader(context.Background(), bytes.NewReader(data), "bench.csv", opts)
				if err != nil {
					b.Fatal(err)
				}
				w, err := pqarrow.NewFileWriter(r.Schema(), io.Discard, props, pqarrow.DefaultWriterProps())
				if err != nil {
					b.Fatal(err)
				}
				for r.Next() {
					if err := w.WriteBuffered(r.RecordBatch()); err != nil {
						b.Fatal(err)
					}
				}
				if r.Err() != nil || r.Rows() != benchRows {
					b.Fatalf("rows %d, err %v", r.Rows(), r.Err())
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(benchRows)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
		})
	}
}

// BenchmarkParse times the value parsers alone, one value per op.
func BenchmarkParse(b *testing.B) {
	ts := []byte("2026-01-14T10:23:45.123456Z")
	dec := []byte("12345.67")
	big := []byte("-1234567890123456789012345.6789")
	b.Run("timestamp", func(b *testing.B) {
		for b.Loop() {
			if _, ok, _ := parseTimestamp(ts, time.UTC, false); !ok {
				b.Fatal("bad")
			}
		}
	})
	b.Run("decimal(10,2)", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok, _ := parseDecimal(dec, 10, 2); !ok {
				b.Fatal("bad")
			}
		}
	})
	b.Run("decimal(38,4)", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok, _ := parseDecimal(big, 38, 4); !ok {
				b.Fatal("bad")
			}
		}
	})
	b.Run("time.Parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := time.Parse(time.RFC3339Nano, string(ts)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNDJSONDecode decodes the benchmark rows written as JSON lines (200,000 rows;
// NDJSON goes through encoding/json and is not tuned like CSV).
func BenchmarkNDJSONDecode(b *testing.B) {
	const rows = 200_000
	var buf bytes.Buffer
	for i, line := range bytes.Split(benchData(), []byte{'\n'})[1:] {
		if i == rows {
			break
		}
		f := bytes.Split(line, []byte{','})
		fmt.Fprintf(&buf, `{"transaction_id":%q,"customer_key":%q,"amount":%s,"event_time":%q`, f[0], f[1], f[2], f[3])
		if len(f[4]) > 0 {
			fmt.Fprintf(&buf, `,"note":%q`, f[4])
		}
		buf.WriteString("}\n")
	}
	data := buf.Bytes()
	opts := benchSchema(b)
	opts.Format = NDJSON
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(context.Background(), bytes.NewReader(data), "bench.ndjson", opts)
		if err != nil {
			b.Fatal(err)
		}
		for r.Next() {
		}
		if r.Err() != nil || r.Rows() != rows {
			b.Fatalf("rows %d, err %v", r.Rows(), r.Err())
		}
		r.Release()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
