package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The generated data lives under the work directory, written once per run and read by
// every engine:
//
//	ingest/csv/part-0..7.csv     the ingest case's CSV files
//	merge/target                 a Delta table (our writer), the MERGE target
//	merge/clustered.parquet      the change rows hitting 10% of the target's files
//	merge/spread.parquet         the change rows hitting every file
//	cdf/table                    a Delta table with the change data feed on
//	scd2/...                     see scd2.go

// ingestHeader and the row format are the ingest case's shape: string id, string key,
// decimal(10,2), UTC timestamp, nullable string.
const ingestHeader = "transaction_id,customer_key,amount,event_time,note\n"

const ingestFiles = 8

// genIngest writes rows CSV rows into 8 files and returns their total size in bytes.
func genIngest(dir string, rows int) (int64, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var total int64
	per := (rows + ingestFiles - 1) / ingestFiles
	buf := make([]byte, 0, 128)
	for f := 0; f < ingestFiles; f++ {
		lo, hi := f*per, min((f+1)*per, rows)
		path := filepath.Join(dir, fmt.Sprintf("part-%d.csv", f))
		out, err := os.Create(path)
		if err != nil {
			return 0, err
		}
		w := bufio.NewWriterSize(out, 1<<20)
		w.WriteString(ingestHeader)
		for i := lo; i < hi; i++ {
			ts := time.UnixMicro(t0 + rng.Int64N(90*86400e6)).UTC()
			buf = buf[:0]
			buf = append(buf, "TX-"...)
			buf = appendPadded(buf, int64(i), 9)
			buf = append(buf, ",CUST-"...)
			buf = appendPadded(buf, int64(rng.IntN(200000)), 6)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(rng.IntN(100000)), 10)
			buf = append(buf, '.')
			buf = appendPadded(buf, int64(rng.IntN(100)), 2)
			buf = append(buf, ',')
			buf = ts.AppendFormat(buf, "2006-01-02T15:04:05.000000Z")
			buf = append(buf, ',')
			if rng.IntN(4) != 0 {
				buf = append(buf, "note "...)
				buf = strconv.AppendInt(buf, int64(rng.IntN(1000)), 10)
			}
			buf = append(buf, '\n')
			w.Write(buf)
		}
		if err := w.Flush(); err != nil {
			out.Close()
			return 0, err
		}
		if err := out.Close(); err != nil {
			return 0, err
		}
		st, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		total += st.Size()
	}
	return total, nil
}

func appendPadded(b []byte, v int64, width int) []byte {
	s := strconv.FormatInt(v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// The MERGE and change feed tables: id long, name string, amount double, updated_at timestamp.
const mergeSchemaJSON = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"double","nullable":true,"metadata":{}},
 {"name":"updated_at","type":"timestamp","nullable":true,"metadata":{}}]}`

// mergeRecord builds the rows for ids, tagged with version tag.
func mergeRecord(sch *arrow.Schema, ids []int64, tag int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("name-" + strconv.FormatInt(id, 10) + "-v" + strconv.Itoa(tag))
		b.Field(2).(*array.Float64Builder).Append(float64(id%100000)/100 + float64(tag))
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(t0 + int64(tag)*86400e6 + id))
	}
	return b.NewRecordBatch()
}

// genDeltaTable writes a Delta table at dir of rows consecutive ids in files files (one
// commit).
func genDeltaTable(ctx context.Context, dir string, rows, files int, props map[string]string) error {
	st, err := fs.New(fs.Config{Dir: filepath.Dir(dir)})
	if err != nil {
		return err
	}
	sch, err := delta.ParseSchema(mergeSchemaJSON)
	if err != nil {
		return err
	}
	asch, err := delta.ArrowSchema(sch)
	if err != nil {
		return err
	}
	tbl, err := delta.Create(ctx, st, filepath.Base(dir), delta.CreateOptions{Schema: sch, Properties: props}, delta.Options{})
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	per := rows / files
	for f := 0; f < files; f++ {
		ids := make([]int64, per)
		for i := range ids {
			ids[i] = int64(f*per + i)
		}
		rec := mergeRecord(asch, ids, 0)
		adds, err := delta.WriteRecords(ctx, st, tbl.Root(), sch, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
		rec.Release()
		if err != nil {
			return err
		}
		tx.AddFiles(adds...)
	}
	_, err = tx.Commit(ctx)
	return err
}

// genMergeSources writes the two change sets: clustered (every row of the first 10% of
// the files) and spread (every rows/changes-th id, so every file).
func genMergeSources(dir string, rows, changes int) error {
	sch, err := delta.ParseSchema(mergeSchemaJSON)
	if err != nil {
		return err
	}
	asch, err := delta.ArrowSchema(sch)
	if err != nil {
		return err
	}
	step := rows / changes
	for _, layout := range []string{"clustered", "spread"} {
		ids := make([]int64, changes)
		for i := range ids {
			if layout == "clustered" {
				ids[i] = int64(i)
			} else {
				ids[i] = int64(i * step)
			}
		}
		rec := mergeRecord(asch, ids, 1)
		err := writeParquet(filepath.Join(dir, layout+".parquet"), asch, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeParquet writes records to one plain Parquet file (snappy).
func writeParquet(path string, sch *arrow.Schema, recs []arrow.RecordBatch) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	w, err := pqarrow.NewFileWriter(sch, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		out.Close()
		return err
	}
	for _, r := range recs {
		if err := w.WriteBuffered(r); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
