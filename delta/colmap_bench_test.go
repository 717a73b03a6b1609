package delta_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// countingStore is a mem store that counts the bytes written under _delta_log/ and
// elsewhere (data files).
type countingStore struct {
	*mem.Store
	logBytes, dataBytes atomic.Int64
	dataFiles           atomic.Int64
}

var _ objectstore.Store = (*countingStore)(nil)

func (s *countingStore) count(key string, size int64) {
	if strings.Contains(key, "/_delta_log/") || strings.HasPrefix(key, "_delta_log/") {
		s.logBytes.Add(size)
		return
	}
	s.dataBytes.Add(size)
	s.dataFiles.Add(1)
}

func (s *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.count(key, size)
	return s.Store.Put(ctx, key, r, size)
}

func (s *countingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	s.count(key, size)
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

const benchRows = 1_000_000

// benchRecords are benchRows rows of six columns (long, int, double, string, timestamp,
// decimal) in batches of 64 k, the same for every table of these benchmarks.
var benchRecords = sync.OnceValue(func() []arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	}, nil)
	var out []arrow.RecordBatch
	const batch = 64 * 1024
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for start := 0; start < benchRows; start += batch {
		n := min(batch, benchRows-start)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := start; i < start+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Int32Builder).Append(int32(i % 1000))
			b.Field(2).(*array.Float64Builder).Append(float64(i) * 0.25)
			b.Field(3).(*array.StringBuilder).Append("customer-" + strconv.Itoa(i%50_000))
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1_000_000))
			b.Field(5).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i) * 7))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
})

// benchTable writes the benchmark rows into a new table of store (column mapping mode
// "" for none).
func benchTable(b *testing.B, store objectstore.Store, mode string) *delta.Table {
	b.Helper()
	ctx := context.Background()
	recs := benchRecords()
	sch, err := delta.SchemaFromArrow(recs[0].Schema())
	if err != nil {
		b.Fatal(err)
	}
	props := map[string]string{"delta.checkpointInterval": "1000"}
	if mode != "" {
		props["delta.columnMapping.mode"] = mode
	}
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, Properties: props}, delta.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: recs}); err != nil {
		b.Fatal(err)
	}
	return tbl
}

// BenchmarkAddColumn adds a nullable column to a 1 M-row table: one metadata-only commit
// (ADD COLUMNS), which writes the log entry and no data file. Metrics: log-bytes/op (the
// commit), data-bytes/op and data-files/op (0: the benchmark fails otherwise).
func BenchmarkAddColumn(b *testing.B) {
	for _, mode := range []string{"", "name"} {
		b.Run("mapping="+map[string]string{"": "none", "name": "name"}[mode], func(b *testing.B) {
			ctx := context.Background()
			store := &countingStore{Store: mem.New(mem.Config{})}
			tbl := benchTable(b, store, mode)
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := snap.NumRecords(); n != benchRows {
				b.Fatalf("table has %d rows, want %d", n, benchRows)
			}
			store.logBytes.Store(0)
			store.dataBytes.Store(0)
			store.dataFiles.Store(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := tbl.Snapshot(ctx)
				if err != nil {
					b.Fatal(err)
				}
				decl, err := delta.ParseSchema(mustSchemaString(b, snap.Schema()))
				if err != nil {
					b.Fatal(err)
				}
				decl.Fields = append(decl.Fields, &delta.StructField{Name: "added_" + strconv.Itoa(i), Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true})
				ev, problems := delta.PlanEvolution(snap, decl, delta.EvolutionOptions{})
				if len(problems) > 0 {
					b.Fatal(problems)
				}
				if _, err := tbl.Evolve(ctx, ev, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n := store.dataFiles.Load(); n != 0 {
				b.Fatalf("adding a column wrote %d data files (%d bytes)", n, store.dataBytes.Load())
			}
			b.ReportMetric(float64(store.logBytes.Load())/float64(b.N), "log-bytes/op")
			b.ReportMetric(float64(store.dataBytes.Load())/float64(b.N), "data-bytes/op")
			b.ReportMetric(float64(store.dataFiles.Load())/float64(b.N), "data-files/op")
		})
	}
}

func mustSchemaString(b *testing.B, st *delta.StructType) string {
	s, err := st.SchemaString()
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkScanColumnMapping scans the same 1 M rows from a table without column mapping
// and from tables with it (name, id, and name after two columns were renamed), side by
// side: a mapped scan renames the file's columns to logical names and must cost no more
// than a few percent (target: at least 0.95x the unmapped rows/s).
func BenchmarkScanColumnMapping(b *testing.B) {
	ctx := context.Background()
	tables := map[string]*delta.Table{}
	for _, c := range []struct{ name, mode string }{{"unmapped", ""}, {"mapped-name", "name"}, {"mapped-id", "id"}, {"mapped-renamed", "name"}} {
		tbl := benchTable(b, mem.New(mem.Config{}), c.mode)
		if c.name == "mapped-renamed" {
			snap, _ := tbl.Snapshot(ctx)
			decl, _ := delta.ParseSchema(mustSchemaString(b, snap.Schema()))
			decl.Fields[1].Name, decl.Fields[3].Name = "quantity", "customer"
			ev, problems := delta.PlanEvolution(snap, decl, delta.EvolutionOptions{RenamedFrom: map[string]string{"quantity": "qty", "customer": "name"}})
			if len(problems) > 0 {
				b.Fatal(problems)
			}
			if _, err := tbl.Evolve(ctx, ev, nil); err != nil {
				b.Fatal(err)
			}
		}
		tables[c.name] = tbl
	}
	for _, name := range []string{"unmapped", "mapped-name", "mapped-id", "mapped-renamed"} {
		b.Run(name, func(b *testing.B) {
			snap, err := tables[name].Snapshot(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sc, err := snap.Scan(ctx, delta.ScanOptions{})
				if err != nil {
					b.Fatal(err)
				}
				var rows int64
				for sc.Next() {
					rows += sc.RecordBatch().NumRows()
				}
				if err := sc.Err(); err != nil {
					b.Fatal(err)
				}
				sc.Release()
				if rows != benchRows {
					b.Fatalf("scanned %d rows, want %d", rows, benchRows)
				}
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
