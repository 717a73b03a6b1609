package delta

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The append benchmarks write the same 1M rows (long id, string, double, timestamp,
// decimal(10,2)) in 64Ki-row batches: BenchmarkAppend through our path (schema checks,
// stats, upload through the fs store, and the Delta commit), BenchmarkPlainPqarrow with
// plain pqarrow straight to a local file and no log. Compare rows/s and MB/s:
//
//	go test ./delta -run '^$' -bench 'Append|PlainPqarrow' -benchtime 5x
const (
	benchRows  = 1 << 20
	benchBatch = 1 << 16
)

const benchSchemaJSON = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"customer","type":"string","nullable":true,"metadata":{}},
 {"name":"score","type":"double","nullable":true,"metadata":{}},
 {"name":"at","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}}]}`

func benchRecords(b *testing.B) (*StructType, []arrow.RecordBatch) {
	b.Helper()
	sch := mustSchema(b, benchSchemaJSON)
	asch, err := ArrowSchema(sch)
	if err != nil {
		b.Fatal(err)
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var recs []arrow.RecordBatch
	for start := 0; start < benchRows; start += benchBatch {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		ids := rb.Field(0).(*array.Int64Builder)
		cust := rb.Field(1).(*array.StringBuilder)
		score := rb.Field(2).(*array.Float64Builder)
		at := rb.Field(3).(*array.TimestampBuilder)
		amt := rb.Field(4).(*array.Decimal128Builder)
		for i := start; i < start+benchBatch; i++ {
			ids.Append(int64(i))
			if i%97 == 0 {
				cust.AppendNull()
			} else {
				cust.Append(fmt.Sprintf("customer-%07d", (i*7919)%500000))
			}
			score.Append(float64(i%1000) / 7)
			at.Append(arrow.Timestamp(base + int64(i)*1_000_003))
			amt.Append(decimal128.FromI64(int64((i * 31) % 10_000_000)))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	return sch, recs
}

// reportThroughput reports rows/s and MB/s of Parquet over wall time, and the process
// CPU time per op since cpuStart (steadier than wall time on a busy machine).
func reportThroughput(b *testing.B, bytes int64, cpuStart time.Duration) {
	secs := b.Elapsed().Seconds()
	if secs <= 0 {
		return
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/secs, "rows/s")
	b.ReportMetric(float64(bytes)/1e6/secs, "MB/s")
	b.ReportMetric(float64((cpuTime()-cpuStart).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	sch, recs := benchRecords(b)
	st, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := Create(ctx, st, "bench", CreateOptions{Schema: sch}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var written int64
	b.ResetTimer()
	cpu := cpuTime()
	for n := 0; n < b.N; n++ {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		w, err := snap.NewDataWriter(WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, TxOptions{Operation: "WRITE"})
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		for _, a := range adds {
			written += a.Size
		}
	}
	b.StopTimer()
	reportThroughput(b, written, cpu)
}

func BenchmarkPlainPqarrow(b *testing.B) {
	_, recs := benchRecords(b)
	dir := b.TempDir()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithCoerceTimestamps(arrow.Microsecond))
	var written int64
	b.ResetTimer()
	cpu := cpuTime()
	for n := 0; n < b.N; n++ {
		p := filepath.Join(dir, fmt.Sprintf("plain-%d.parquet", n))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		pw, err := pqarrow.NewFileWriter(recs[0].Schema(), bw, props, aprops)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := pw.WriteBuffered(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := pw.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		info, _ := f.Stat()
		f.Close()
		written += info.Size()
	}
	b.StopTimer()
	reportThroughput(b, written, cpu)
}

// BenchmarkAppendPartitioned writes the same rows split over 16 partitions whose rows
// are interleaved (the worst case: every batch is gathered per partition).
func BenchmarkAppendPartitioned(b *testing.B) {
	ctx := context.Background()
	sch, recs := benchRecords(b)
	psch := &StructType{Fields: append(append([]*StructField(nil), sch.Fields...),
		&StructField{Name: "bucket", Type: &PrimitiveType{Name: TypeInteger}, Nullable: true})}
	asch, _ := ArrowSchema(psch)
	var precs []arrow.RecordBatch
	for _, r := range recs {
		ib := array.NewInt32Builder(memory.DefaultAllocator)
		for i := 0; i < int(r.NumRows()); i++ {
			ib.Append(int32(i % 16))
		}
		bucket := ib.NewArray()
		ib.Release()
		precs = append(precs, array.NewRecordBatch(asch, append(append([]arrow.Array(nil), r.Columns()...), bucket), r.NumRows()))
	}
	st, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	var written int64
	b.ResetTimer()
	cpu := cpuTime()
	for n := 0; n < b.N; n++ {
		adds, err := WriteRecords(ctx, st, fmt.Sprintf("t%d", n), psch, []string{"bucket"}, precs, WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range adds {
			written += a.Size
		}
	}
	b.StopTimer()
	reportThroughput(b, written, cpu)
}
