package jobs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func salesTable(t *testing.T) *Table {
	return &Table{
		Name:       "bronze.sales",
		Path:       "bronze/sales",
		Schema:     schemaOf(t, "id string", "qty int", "amount decimal(10,2)", "sold_at timestamp", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
}

func putFile(t *testing.T, s objectstore.Store, key, body string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

// ingestEnv returns an environment whose sources live in a separate "landing" store.
func ingestEnv(t *testing.T, warehouse objectstore.Store, tables ...*Table) (*Env, objectstore.Store) {
	landing := mem.New(mem.Config{})
	env := newTestEnv(warehouse, &testClock{t: t0}, tables...)
	env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
		return landing, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
	}
	return env, landing
}

const day1 = "id,qty,amount,sold_at\nT1,2,23.80,2026-01-14T09:12:00Z\nT2,1,149.00,2026-01-14T10:40:00Z\n"
const day2 = "id,qty,amount,sold_at\nT3,5,9.95,2026-01-15 11:05:00\n"

func TestIngestAppendExactlyOnce(t *testing.T) {
	sales := salesTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), sales)
	putFile(t, landing, "sales/2026-01-14.csv", day1)
	putFile(t, landing, "sales/2026-01-15.csv", day2)
	putFile(t, landing, "sales/readme.txt", "not a csv")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name})

	res := runStage(t, stage, env)
	if res.RowsWritten != 3 || res.FilesRead != 2 || len(res.VersionsWritten) != 1 {
		t.Fatalf("first run: %+v, want 3 rows from 2 files in one commit", res)
	}
	want := []string{
		"T1|2|23.8|2026-01-14T09:12:00Z|/landing/sales/2026-01-14.csv|2026-01-14T09:00:00Z",
		"T2|1|149|2026-01-14T10:40:00Z|/landing/sales/2026-01-14.csv|2026-01-14T09:00:00Z",
		"T3|5|9.95|2026-01-15T11:05:00Z|/landing/sales/2026-01-15.csv|2026-01-14T09:00:00Z",
	}
	if got := tableRows(t, env, sales); !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	v := tableVersion(t, env, sales)
	for range 2 {
		if res := runStage(t, stage, env); res.RowsWritten != 0 || len(res.VersionsWritten) != 0 {
			t.Fatalf("rerun loaded %+v, want nothing", res)
		}
	}
	if got := tableVersion(t, env, sales); got != v {
		t.Fatalf("rerun moved the table from version %d to %d", v, got)
	}
	putFile(t, landing, "sales/2026-01-16.csv", "id,qty,amount,sold_at\nT4,1,1.00,2026-01-16T08:00:00Z\n")
	if res := runStage(t, stage, env); res.RowsWritten != 1 || res.FilesRead != 1 {
		t.Fatalf("new file: %+v, want exactly its 1 row", res)
	}
	if n := len(tableRows(t, env, sales)); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
}

func TestIngestBadRecords(t *testing.T) {
	bad := "id,qty,amount,sold_at\nT5,1,1.00,2026-01-16T08:00:00Z\nT6,x,2.00,2026-01-16T08:00:00Z\nT7,1,12.345,2026-01-16T08:00:00Z\n"
	t.Run("fail names file, line and column and leaves the table unchanged", func(t *testing.T) {
		sales := salesTable(t)
		env, landing := ingestEnv(t, mem.New(mem.Config{}), sales)
		putFile(t, landing, "sales/a.csv", day1)
		putFile(t, landing, "sales/b.csv", bad)
		_, err := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name}).Run(context.Background(), env)
		var de *decode.Error
		if !errors.As(err, &de) || de.Line != 3 || de.Column != "qty" {
			t.Fatalf("err = %v, want a decode error at line 3, column qty", err)
		}
		if !strings.Contains(err.Error(), `/landing/sales/b.csv:3: column qty (2): "x" is not an integer`) {
			t.Errorf("message %q does not name file, line, column and value", err)
		}
		if v := tableVersion(t, env, sales); v != -1 {
			t.Errorf("table at version %d after a failed first run, want none (unchanged)", v)
		}
	})
	t.Run("skip counts and loads the good rows", func(t *testing.T) {
		sales := salesTable(t)
		env, landing := ingestEnv(t, mem.New(mem.Config{}), sales)
		putFile(t, landing, "sales/b.csv", bad)
		res := runStage(t, NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, OnError: "skip"}), env)
		if res.RowsSkipped != 2 || res.RowsWritten != 1 {
			t.Fatalf("result %+v, want 2 skipped and 1 written", res)
		}
	})
	t.Run("quarantine writes each bad record once", func(t *testing.T) {
		sales := salesTable(t)
		q := &Table{Name: "bronze.sales_quarantine", Path: "bronze/sales_quarantine",
			Schema: schemaOf(t, "source_file string", "line bigint", "column string", "value string", "error string", "record string", "load_timestamp timestamp")}
		env, landing := ingestEnv(t, mem.New(mem.Config{}), sales, q)
		putFile(t, landing, "sales/b.csv", bad)
		stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, OnError: "quarantine", QuarantineTable: q.Name})
		runStage(t, stage, env)
		runStage(t, stage, env)
		got := tableRows(t, env, q, "line", "column", "value", "record")
		want := []string{"3|qty|x|T6,x,2.00,2026-01-16T08:00:00Z", "4|amount|12.345|T7,1,12.345,2026-01-16T08:00:00Z"}
		if !slices.Equal(got, want) {
			t.Fatalf("quarantine:\n%s", diff(got, want))
		}
		if got := tableRows(t, env, sales, "id"); !slices.Equal(got, []string{"T5"}) {
			t.Fatalf("target rows %v, want [T5]", got)
		}
	})
}

func TestIngestCrashAtEveryOperation(t *testing.T) {
	for _, mode := range []string{"append", "upsert"} {
		t.Run(mode, func(t *testing.T) {
			setup := func() (*faultstore.Store, *Env, *Table) {
				sales := salesTable(t)
				fs := faultstore.New(mem.New(mem.Config{}))
				env, landing := ingestEnv(t, fs, sales)
				putFile(t, landing, "sales/a.csv", day1)
				putFile(t, landing, "sales/b.csv", "id,qty,amount,sold_at\nT2,3,99.00,2026-01-15T09:00:00Z\nT3,5,9.95,2026-01-15 11:05:00\n")
				return fs, env, sales
			}
			cfg := &IngestConfig{Source: "/landing/sales/*.csv", Target: "bronze.sales", Mode: mode}
			if mode == "upsert" {
				cfg.Keys = []string{"id"}
			}
			stage := NewIngest("ingest", cfg)
			crashAtEveryOperation(t, stage, setup, rowsOf(t))
		})
	}
}

func TestIngestUpsertCorrectionsAndDeletes(t *testing.T) {
	ctx := context.Background()
	sales := salesTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), sales)
	putFile(t, landing, "sales/2026-01-14.csv", "id,qty,amount,sold_at,op\nT1,2,23.80,2026-01-14T09:12:00Z,\nT2,1,149.00,2026-01-14T10:40:00Z,\n")
	putFile(t, landing, "sales/2026-01-15.csv", "id,qty,amount,sold_at,op\nT2,1,129.00,2026-01-14T10:40:00Z,U\nT3,5,9.95,2026-01-15T11:05:00Z,\nT1,2,23.80,2026-01-14T09:12:00Z,D\n")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, Mode: "upsert", Keys: []string{"id"}, DeleteWhen: "op = 'D'"})
	res := runStage(t, stage, env)
	if len(res.VersionsWritten) != 2 {
		t.Fatalf("result %+v, want one commit per file", res)
	}
	if got, want := tableRows(t, env, sales, "id", "amount", "source_file"), []string{"T2|129|/landing/sales/2026-01-15.csv", "T3|9.95|/landing/sales/2026-01-15.csv"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	// The second file's commit shows the correction as an update and the delete.
	v := res.VersionsWritten[1].Version
	tbl, _ := env.openTable(ctx, sales)
	rd, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &v, EndVersion: &v})
	if err != nil {
		t.Fatal(err)
	}
	var feed []string
	for rd.Next() {
		rec := rd.RecordBatch()
		for i := range int(rec.NumRows()) {
			feed = append(feed, rec.Column(rec.Schema().FieldIndices("_change_type")[0]).ValueStr(i)+" "+rec.Column(0).ValueStr(i)+" "+rec.Column(2).ValueStr(i))
		}
	}
	rd.Release()
	slices.Sort(feed)
	want := []string{"delete T1 23.8", "insert T3 9.95", "update_postimage T2 129", "update_preimage T2 149"}
	if !slices.Equal(feed, want) {
		t.Fatalf("change feed of the second file:\n%s", diff(feed, want))
	}
	if res := runStage(t, stage, env); len(res.VersionsWritten) != 0 {
		t.Fatalf("rerun wrote %+v", res.VersionsWritten)
	}
}

// Two runs of one upsert ingest at once: the second run loads both files while the
// first is reading them (a run decodes all its files before it commits any); the first
// run then finds every file loaded and commits nothing. Each file is committed once.
func TestIngestUpsertConcurrentRunsLoadOnce(t *testing.T) {
	sales := salesTable(t)
	warehouse := mem.New(mem.Config{})
	env, landing := ingestEnv(t, warehouse, sales)
	putFile(t, landing, "sales/2026-01-14.csv", "id,qty,amount,sold_at,op\nT1,2,23.80,2026-01-14T09:12:00Z,\n")
	putFile(t, landing, "sales/2026-01-15.csv", "id,qty,amount,sold_at,op\nT1,3,35.70,2026-01-14T09:12:00Z,U\nT2,1,9.95,2026-01-15T11:05:00Z,\n")
	cfg := &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, Mode: "upsert", Keys: []string{"id"}, DeleteWhen: "op = 'D'"}
	spy := &interposer{Store: landing, prefix: "sales/2026-01-15.csv", onGet: true}
	env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
		return spy, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
	}
	other, _ := ingestEnv(t, warehouse, sales)
	other.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
		return landing, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
	}
	spy.hook = func() {
		if res := runStage(t, NewIngest("ingest", cfg), other); len(res.VersionsWritten) != 2 {
			t.Errorf("the concurrent run wrote %v; want both files' commits", res.VersionsWritten)
		}
	}
	res := runStage(t, NewIngest("ingest", cfg), env)
	if len(res.VersionsWritten) != 0 || res.RowsWritten != 0 {
		t.Errorf("result: %d rows written in %v; want nothing (the other run loaded both files)", res.RowsWritten, res.VersionsWritten)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "2026-01-15.csv: already loaded") }) {
		t.Errorf("notes %q do not say the files were loaded meanwhile", res.Notes)
	}
	if got, want := tableRows(t, env, sales, "id", "qty"), []string{"T1|3", "T2|1"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	tbl, err := env.openTable(t.Context(), sales)
	if err != nil {
		t.Fatal(err)
	}
	var updates int
	for v := range tableVersion(t, env, sales) + 1 {
		for _, r := range changeRows(t, tbl, v) {
			if strings.Contains(r, "update_postimage") {
				updates++
			}
		}
	}
	if updates != 1 {
		t.Errorf("the change feed shows T1's correction %d times, want once", updates)
	}
}

// readAtCounter counts how a local landing store's files are opened.
type readAtCounter struct {
	*fs.Store
	gets, opens atomic.Int64
}

func (c *readAtCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *readAtCounter) OpenReaderAt(ctx context.Context, key string) (objectstore.ReaderAtCloser, int64, error) {
	c.opens.Add(1)
	return c.Store.OpenReaderAt(ctx, key)
}

// Parquet sources load like CSV ones, exactly once, from a store in memory (read whole)
// and from local files (read in place, never fetched whole).
// salesParquet is a Parquet file of two sales (T1: qty 2, T2: qty 1) in salesTable's
// columns.
func salesParquet(t *testing.T) []byte {
	t.Helper()
	asch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "sold_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"T1", "T2"}, nil)
	b.Field(1).(*array.Int32Builder).AppendValues([]int32{2, 1}, nil)
	b.Field(2).(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(2380), decimal128.FromI64(14900)}, nil)
	b.Field(3).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1768381920000000, 1768387200000000}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(asch, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestIngestParquetSources(t *testing.T) {
	ctx := context.Background()
	parquetFile := salesParquet(t)
	want := []string{
		"T1|2|23.8|2026-01-14T09:12:00Z|/landing/sales/2026-01-14.parquet|2026-01-14T09:00:00Z",
		"T2|1|149|2026-01-14T10:40:00Z|/landing/sales/2026-01-14.parquet|2026-01-14T09:00:00Z",
	}
	local, err := fs.New(fs.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	counted := &readAtCounter{Store: local}
	for name, landing := range map[string]objectstore.Store{"memory": mem.New(mem.Config{}), "local files": counted} {
		t.Run(name, func(t *testing.T) {
			sales := salesTable(t)
			env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, sales)
			env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) {
				return landing, strings.TrimPrefix(strings.TrimPrefix(loc, "/landing"), "/"), nil
			}
			if err := landing.Put(ctx, "sales/2026-01-14.parquet", bytes.NewReader(parquetFile), int64(len(parquetFile))); err != nil {
				t.Fatal(err)
			}
			stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*.parquet", Target: sales.Name})
			if res := runStage(t, stage, env); res.RowsWritten != 2 || res.FilesRead != 1 {
				t.Fatalf("first run: %+v, want 2 rows from 1 file", res)
			}
			if got := tableRows(t, env, sales); !slices.Equal(got, want) {
				t.Fatalf("rows:\n%s", diff(got, want))
			}
			if res := runStage(t, stage, env); res.RowsWritten != 0 {
				t.Fatalf("rerun loaded %+v, want nothing", res)
			}
		})
	}
	if counted.opens.Load() != 1 || counted.gets.Load() != 0 {
		t.Errorf("local file opened in place %d times and fetched %d times; want 1 and 0", counted.opens.Load(), counted.gets.Load())
	}
}
