package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

// measurement is what a worker process reports on its last stdout line (JSON); the
// driver adds the process's peak RSS and CPU time from its rusage.
type measurement struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the CPU time (user + system, all threads) the process used in the
	// measured step; 0 when the child does not say (the driver then takes its rusage).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	Rows       int64   `json:"rows"`
	BytesOut   int64   `json:"bytes_out,omitempty"`
	Note       string  `json:"note,omitempty"`
}

// step is a measured step under way: when it started, on the wall clock and in the
// process's CPU time.
type step struct {
	wall time.Time
	cpu  time.Duration
}

func startStep() step { return step{time.Now(), processCPU()} }

// since returns the wall and CPU seconds since the step started.
func (s step) since() (secs, cpu float64) {
	return time.Since(s.wall).Seconds(), (processCPU() - s.cpu).Seconds()
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workers are the cases run in a child process of the driver, so each has its own
// peak RSS: name → func(ctx, args).
var workers = map[string]func(ctx context.Context, args []string) (measurement, error){
	"ingest-ours":    ingestOurs,
	"ingest-arrowgo": ingestArrowGo,
	"merge-ours":     mergeOurs,
	"cdf-changes":    cdfChanges,
	"cdf-scan":       cdfScan,
	"scd2-setup":     scd2Setup,
	"scd2-ours":      scd2Ours,
	"snapshot-setup": snapshotSetup,
	"snapshot-ours":  snapshotOurs,
	"extract-setup":  extractSetup,
	"extract-merge":  extractMerge,
	"logload-setup":  logloadSetup,
	"facts-setup":    factsSetup,
	"facts-late":     factsLateEvent,
	"facts-append":   factsAppend,
	"facts-update":   factsUpdate,
	"facts-ours":     factsOurs,
	"logload-ours":   logloadOurs,
	// gen-cdf tableDir rows writes the change feed case's table, to profile it alone.
	"gen-cdf": func(ctx context.Context, args []string) (measurement, error) {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return measurement{}, err
		}
		err = genDeltaTable(ctx, args[0], n, max(1, n/100_000), delta.ChangeDataFeedProperties())
		return measurement{Rows: int64(n)}, err
	},
	// gen-ingest csvDir rows writes the ingest case's CSV files, to profile a case alone.
	"gen-ingest": func(_ context.Context, args []string) (measurement, error) {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return measurement{}, err
		}
		size, err := genIngest(args[0], n)
		return measurement{Rows: int64(n), BytesOut: size}, err
	},
}

// openTableDir opens the Delta table whose root directory is dir.
func openTableDir(ctx context.Context, dir string) (*delta.Table, objectstore.Store, error) {
	st, err := fs.New(fs.Config{Dir: filepath.Dir(dir)})
	if err != nil {
		return nil, nil, err
	}
	tbl, err := delta.Open(ctx, st, filepath.Base(dir), delta.Options{})
	return tbl, st, err
}

func ingestTable() (*jobs.Table, error) {
	sch, err := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"transaction_id","type":"string","nullable":false,"metadata":{}},
 {"name":"customer_key","type":"string","nullable":false,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":false,"metadata":{}},
 {"name":"event_time","type":"timestamp","nullable":false,"metadata":{}},
 {"name":"note","type":"string","nullable":true,"metadata":{}},
 {"name":"source_file","type":"string","nullable":true,"metadata":{}},
 {"name":"load_timestamp","type":"timestamp","nullable":true,"metadata":{}}]}`)
	if err != nil {
		return nil, err
	}
	return &jobs.Table{Name: "bronze.transactions", Path: "bronze/transactions", Schema: sch}, nil
}

func newEnv(warehouse objectstore.Store, tables ...*jobs.Table) *jobs.Env {
	m := map[string]*jobs.Table{}
	for _, t := range tables {
		m[t.Name] = t
	}
	return &jobs.Env{
		Warehouse: warehouse,
		Tables:    m,
		OpenLocation: func(ctx context.Context, loc string) (objectstore.Store, string, error) {
			st, err := fs.New(fs.Config{Dir: loc})
			return st, "", err
		},
		Lineage: delta.Lineage{Pipeline: "bench", Stage: "bench", RunID: "bench", Attempt: 1},
		Delta:   delta.Options{UserName: "bench"},
	}
}

// ingestOurs runs the ingest stage: args csvDir outDir (a directory, or an s3:// URL).
func ingestOurs(ctx context.Context, args []string) (measurement, error) {
	csvDir, out := args[0], args[1]
	decl, err := ingestTable()
	if err != nil {
		return measurement{}, err
	}
	wh, err := storeurl.Open(ctx, out, storeurl.Options{}) // a directory, or s3:// (-ingest-s3)
	if err != nil {
		return measurement{}, err
	}
	env := newEnv(wh, decl)
	stage := jobs.NewIngest("ingest", &jobs.IngestConfig{Source: csvDir + "/*.csv", Target: decl.Name})
	st := startStep()
	res, err := stage.Run(ctx, env)
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: res.RowsWritten, BytesOut: res.BytesWritten,
		Note: fmt.Sprintf("%d files, one commit", res.FilesWritten)}, nil
}

// ingestArrowGo is the naive pipeline: arrow-go's CSV reader into pqarrow, one Parquet
// file per CSV file, no log, one goroutine: args csvDir outDir.
func ingestArrowGo(ctx context.Context, args []string) (measurement, error) {
	csvDir, out := args[0], args[1]
	if err := os.MkdirAll(out, 0o777); err != nil {
		return measurement{}, err
	}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "transaction_id", Type: arrow.BinaryTypes.String},
		{Name: "customer_key", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
		{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	files, err := filepath.Glob(filepath.Join(csvDir, "*.csv"))
	if err != nil {
		return measurement{}, err
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	st := startStep()
	var rows, bytes int64
	for i, name := range files {
		in, err := os.Open(name)
		if err != nil {
			return measurement{}, err
		}
		r := csv.NewReader(in, sch, csv.WithHeader(true), csv.WithChunk(65536), csv.WithNullReader(true, ""),
			csv.WithAllocator(memory.DefaultAllocator))
		path := filepath.Join(out, fmt.Sprintf("part-%d.parquet", i))
		f, err := os.Create(path)
		if err != nil {
			return measurement{}, err
		}
		w, err := pqarrow.NewFileWriter(sch, f, props, pqarrow.DefaultWriterProps())
		if err != nil {
			return measurement{}, err
		}
		for r.Next() {
			rec := r.RecordBatch()
			rows += rec.NumRows()
			if err := w.Write(rec); err != nil {
				return measurement{}, err
			}
		}
		if err := r.Err(); err != nil {
			return measurement{}, fmt.Errorf("%s: %w", name, err)
		}
		r.Release()
		if err := w.Close(); err != nil {
			return measurement{}, err
		}
		in.Close()
		st, err := os.Stat(path)
		if err != nil {
			return measurement{}, err
		}
		bytes += st.Size()
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: rows, BytesOut: bytes, Note: "sequential, one file per CSV"}, nil
}

// readParquet reads a whole Parquet file into records.
func readParquet(ctx context.Context, path string) ([]arrow.RecordBatch, int64, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, 0, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 65536}, memory.DefaultAllocator)
	if err != nil {
		return nil, 0, err
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 65536)
	defer tr.Release()
	var recs []arrow.RecordBatch
	var rows int64
	for tr.Next() {
		rec := tr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		rows += rec.NumRows()
	}
	return recs, rows, tr.Err()
}

// mergeOurs merges a Parquet file of changes into a table by id: args tableDir source.
func mergeOurs(ctx context.Context, args []string) (measurement, error) {
	tbl, _, err := openTableDir(ctx, args[0])
	if err != nil {
		return measurement{}, err
	}
	src, n, err := readParquet(ctx, args[1])
	if err != nil {
		return measurement{}, err
	}
	st := startStep()
	res, err := tbl.Merge(ctx, delta.MergeOptions{Source: src, On: []string{"id"},
		WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate}},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}})
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	if res.NumTargetRowsUpdated != n {
		return measurement{}, fmt.Errorf("merge updated %d rows, want %d", res.NumTargetRowsUpdated, n)
	}
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: n, BytesOut: res.NumTargetBytesAdded,
		Note: fmt.Sprintf("%d files rewritten", res.NumTargetFilesRemoved)}, nil
}

// cdfChanges reads the table's whole change feed: args tableDir.
func cdfChanges(ctx context.Context, args []string) (measurement, error) {
	st := startStep()
	tbl, _, err := openTableDir(ctx, args[0])
	if err != nil {
		return measurement{}, err
	}
	v0 := int64(0)
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &v0})
	if err != nil {
		return measurement{}, err
	}
	defer r.Release()
	var rows int64
	for r.Next() {
		rows += r.RecordBatch().NumRows()
	}
	if err := r.Err(); err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: rows}, nil
}

// cdfScan reads the table's latest snapshot: args tableDir.
func cdfScan(ctx context.Context, args []string) (measurement, error) {
	st := startStep()
	tbl, _, err := openTableDir(ctx, args[0])
	if err != nil {
		return measurement{}, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return measurement{}, err
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		return measurement{}, err
	}
	defer sc.Release()
	var rows int64
	for sc.Next() {
		rows += sc.RecordBatch().NumRows()
	}
	if err := sc.Err(); err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: rows}, nil
}

// copyDir copies a directory tree (a table, so each engine gets its own copy), with the
// files' modification times (a Delta commit's timestamp on local disk).
func copyDir(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o777)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
}

// enableDeletionVectors turns deletion vectors on for the table at path (a case's "dv"
// variant does it before its timed run).
func enableDeletionVectors(ctx context.Context, wh objectstore.Store, path string) error {
	dt, err := delta.Open(ctx, wh, path, delta.Options{})
	if err != nil {
		return err
	}
	_, err = dt.SetProperties(ctx, map[string]string{delta.PropEnableDeletionVectors: "true"}, nil)
	return err
}
