package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestWriteStreamFiles writes with StreamFiles on the fs and mem stores: files rolled at
// the target size and the last one read back exactly; an aborted writer publishes
// nothing and leaves no temporary file.
func TestWriteStreamFiles(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	batch := func(b int) arrow.RecordBatch {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		defer rb.Release()
		for i := range 5000 {
			id := b*5000 + i
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%d-%s", id*7919, strings.Repeat("v", id%64)))
		}
		return rb.NewRecordBatch()
	}
	stores := map[string]func(t *testing.T) (objectstore.Store, string){
		"fs": func(t *testing.T) (objectstore.Store, string) {
			dir := t.TempDir()
			st, err := fs.New(fs.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return st, dir
		},
		"mem": func(t *testing.T) (objectstore.Store, string) { return mem.New(mem.Config{}), "" },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, dir := open(t)
			opts := WriteOptions{StreamFiles: true, TargetFileSize: 256 << 10, RowGroupSize: 64 << 10, MaxMemory: 256 << 10}
			w, err := NewDataWriter(st, "t", sch, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var all []arrow.RecordBatch
			for b := range 10 {
				rec := batch(b)
				defer rec.Release()
				all = append(all, rec)
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			adds, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(adds) < 2 {
				t.Errorf("%d files with a 256 KiB target, want several", len(adds))
			}
			for _, a := range adds {
				info, err := st.Stat(ctx, "t/"+a.Path)
				if err != nil || info.Size != a.Size {
					t.Errorf("file %s: stat %+v, %v; want size %d", a.Path, info, err, a.Size)
				}
			}
			got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
			diffRows(t, rowSet(t, got), rowSet(t, all))

			w, err = NewDataWriter(st, "aborted", sch, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range all[:3] {
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			w.Abort()
			if objs, err := st.List(ctx, "aborted/", ""); err != nil || len(objs) != 0 {
				t.Errorf("aborted writer left %v (%v), want nothing", objs, err)
			}
			if dir != "" {
				if left, _ := os.ReadDir(filepath.Join(dir, "aborted")); len(left) != 0 {
					t.Errorf("aborted writer left %d entries (temporary files?) on disk", len(left))
				}
			}
		})
	}
}

// flatAllTypes is allTypesSchema and allTypesRows without the nested columns: what the
// FlatWriter writes.
func flatAllTypes(t *testing.T) (*StructType, arrow.RecordBatch) {
	t.Helper()
	nested := map[string]bool{"st": true, "arr": true, "m": true}
	sch := mustSchema(t, allTypesSchema)
	sch.Fields = slices.DeleteFunc(slices.Clone(sch.Fields), func(f *StructField) bool { return nested[f.Name] })
	var rows []map[string]any
	if err := json.Unmarshal([]byte(allTypesRows), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for k := range nested {
			delete(r, k)
		}
	}
	js, _ := json.Marshal(rows)
	asch, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	return sch, recordFromJSON(t, asch, string(js))
}

// storedBytes reads a stored object whole.
func storedBytes(t *testing.T, st objectstore.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readParquetFile opens a stored Parquet file.
func readParquetFile(t *testing.T, st objectstore.Store, key string) *file.Reader {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(storedBytes(t, st, key)))
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// pqarrowBytes writes batches with pqarrow's FileWriter under the properties the
// DataWriter uses for opts: the file the DataWriter's own writer must equal byte for byte.
func pqarrowBytes(t *testing.T, sch *arrow.Schema, batches []arrow.RecordBatch, opts WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	props, aprops := parquetWriterProps(opts.withDefaults(), batches[0])
	pw, err := pqarrow.NewFileWriter(sch, &buf, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := pw.WriteBuffered(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFlatWriterMatchesPqarrow writes a flat schema of every primitive type with the
// DataWriter (its pqfile.FlatWriter) and with pqarrow's FileWriter under the same properties:
// the files are the same bytes (so are the Parquet schemas and the rows read back).
func TestFlatWriterMatchesPqarrow(t *testing.T) {
	ctx := context.Background()
	sch, rec := flatAllTypes(t)
	defer rec.Release()
	batches := []arrow.RecordBatch{rec.NewSlice(0, 1), rec.NewSlice(1, 3), rec.NewSlice(3, 4), rec}
	defer func() {
		for _, b := range batches[:3] {
			b.Release()
		}
	}()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(ctx, st, "", sch, nil, batches, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !pqfile.IsFlat(rec.Schema()) || len(adds) != 1 {
		t.Fatalf("flat schema %v, %d files; want a flat schema in 1 file", pqfile.IsFlat(rec.Schema()), len(adds))
	}
	raw := storedBytes(t, st, adds[0].Path)
	ref := pqarrowBytes(t, rec.Schema(), batches, WriteOptions{})
	if !bytes.Equal(raw, ref) { // the one-value batches included
		t.Errorf("file of %d bytes differs from pqarrow's %d bytes", len(raw), len(ref))
	}
	ours, err := file.NewParquetReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	theirs, err := file.NewParquetReader(bytes.NewReader(ref))
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()

	schemaOf := func(r *file.Reader) []string {
		var out []string
		sc := r.MetaData().Schema
		for i := 0; i < sc.NumColumns(); i++ {
			c := sc.Column(i)
			out = append(out, fmt.Sprintf("%s %s %s def=%d", c.Path(), c.PhysicalType(), c.LogicalType(), c.MaxDefinitionLevel()))
		}
		return out
	}
	if got, want := schemaOf(ours), schemaOf(theirs); !slices.Equal(got, want) {
		t.Errorf("parquet schema:\n got  %v\n want %v", got, want)
	}
	read := func(r *file.Reader) []string {
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Release()
		tr := array.NewTableReader(tbl, 100)
		defer tr.Release()
		var recs []arrow.RecordBatch
		for tr.Next() {
			r := tr.RecordBatch()
			r.Retain()
			defer r.Release()
			recs = append(recs, r)
		}
		return rowSet(t, recs)
	}
	diffRows(t, read(ours), read(theirs))
	diffRows(t, read(ours), rowSet(t, batches))
}

// TestFlatWriterConstantColumns: string and binary columns whose batches are each one
// value go through the one-entry dictionary path; a change of value, a null or a mixed
// batch inside the same row group continues as ordinary dictionary or plain encoding.
// Every row reads back, and a chunk of one value is dictionary encoded.
func TestFlatWriterConstantColumns(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"src","type":"string","nullable":true,"metadata":{}},
 {"name":"bin","type":"binary","nullable":false,"metadata":{}},
 {"name":"note","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	batch := func(first, n int, src func(i int) *string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		defer b.Release()
		for i := first; i < first+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if s := src(i); s != nil {
				b.Field(1).(*array.StringBuilder).Append(*s)
			} else {
				b.Field(1).AppendNull()
			}
			b.Field(2).(*array.BinaryBuilder).Append([]byte("bytes"))
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprint("n", i%3))
		}
		return b.NewRecordBatch()
	}
	str := func(s string) func(int) *string { return func(int) *string { return &s } }
	var recs []arrow.RecordBatch
	add := func(r arrow.RecordBatch) { recs = append(recs, r) }
	add(batch(0, 100, str("/landing/a.csv")))
	add(batch(100, 100, str("/landing/a.csv")))
	add(batch(200, 50, str("/landing/b.csv"))) // a second value in the same row group
	add(batch(250, 50, str("/landing/a.csv")))
	add(batch(300, 10, func(i int) *string { // nulls and mixed values
		if i%2 == 0 {
			return nil
		}
		s := fmt.Sprint("v", i)
		return &s
	}))
	whole := batch(1000, 300, str("/landing/c.csv"))
	add(whole.NewSlice(100, 250)) // a slice, offset into its buffers
	whole.Release()
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	st := mem.New(mem.Config{})
	w, err := NewDataWriter(st, "t", sch, nil, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if i == 4 {
			w.open[""].flushRowGroup() // the slice starts a row group of its own
		}
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), rowSet(t, recs))

	pf := readParquetFile(t, st, "t/"+adds[0].Path)
	defer pf.Close()
	if n := pf.NumRowGroups(); n != 2 {
		t.Fatalf("%d row groups, want 2", n)
	}
	for rg, col := range map[int]int{0: 2, 1: 1} { // bin in the first, src in the second
		cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		if !cc.HasDictionaryPage() {
			t.Errorf("row group %d column %d: no dictionary page, want one value dictionary encoded", rg, col)
		}
	}
}

// TestWriteStreamFilesMultipart streams a file larger than the S3 store's single-PUT
// limit (16 MiB) to MinIO, so that it goes as a multipart upload while it is written, and
// reads it back; an aborted file of that size leaves no object.
func TestWriteStreamFilesMultipart(t *testing.T) {
	st := testenv.S3Store(t)
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []arrow.RecordBatch
	for b := range 5 { // 5 × 16 Ki rows × 256 random bytes: 20 MiB that snappy cannot shrink
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		buf := make([]byte, 256)
		for i := range 16 << 10 {
			rb.Field(0).(*array.Int64Builder).Append(int64(b<<16 + i))
			for j := range buf {
				buf[j] = byte(rng.IntN(256))
			}
			rb.Field(1).(*array.StringBuilder).BinaryBuilder.Append(buf)
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	opts := WriteOptions{StreamFiles: true, MaxMemory: 16 << 20}
	adds, err := WriteRecords(ctx, st, "t", sch, nil, recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) != 1 || adds[0].Size <= 16<<20 {
		t.Fatalf("%d files, first of %d bytes; want one over 16 MiB", len(adds), adds[0].Size)
	}
	if info, err := st.Stat(ctx, "t/"+adds[0].Path); err != nil || info.Size != adds[0].Size {
		t.Fatalf("stat: %+v, %v; want %d bytes", info, err, adds[0].Size)
	}
	got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), rowSet(t, recs))

	w, err := NewDataWriter(st, "aborted", sch, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if objs, err := st.List(ctx, "aborted/", ""); err != nil || len(objs) != 0 {
		t.Errorf("aborted writer left %v (%v), want nothing", objs, err)
	}
}

// A single record far bigger than a row group (a MERGE's inserts, a first load) still
// ends in row groups near RowGroupSize and files near TargetFileSize: readers hold a row
// group's column chunks at a time, so one huge row group would make their memory grow
// with the table.
func TestWriteSplitsBigRecord(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	const n = 300_000
	rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	for i := range n {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("value %08d", i*7919%n))
	}
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	st := mem.New(mem.Config{})
	// ~8 MB of Arrow data: with 1 MiB row groups and 2 MiB files, several of each.
	opts := WriteOptions{RowGroupSize: 1 << 20, TargetFileSize: 2 << 20}
	adds, err := WriteRecords(ctx, st, "", sch, nil, []arrow.RecordBatch{rec}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) < 2 {
		t.Errorf("one %d-row record with a 2 MiB target: %d file(s), want several", n, len(adds))
	}
	var rows int64
	for _, a := range adds {
		r := readParquetFile(t, st, a.Path)
		for g := range r.NumRowGroups() {
			got := r.MetaData().RowGroup(g).NumRows()
			rows += got
			if got > writeChunkRows {
				t.Errorf("%s row group %d: %d rows, want at most %d", a.Path, g, got, writeChunkRows)
			}
		}
		r.Close()
	}
	if rows != n {
		t.Errorf("row groups hold %d rows, want %d", rows, n)
	}
	got, _ := scanAll(t, st, "", sch, nil, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), rowSet(t, []arrow.RecordBatch{rec}))
}

// A large record whose column is a slice with its null count unknown is written while
// its statistics are folded on another goroutine (with -race: neither writes the count
// the other reads), and its file's rows and null count are the record's.
func TestWriteSlicedColumnWithNulls(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 20000 {
		if i%3 == 0 {
			b.AppendNull()
		} else {
			b.Append(int64(i))
		}
	}
	whole := b.NewArray()
	defer whole.Release()
	st := mem.New(mem.Config{})
	// (rounds: the race detector sees a race of two goroutines only when their
	// accesses fall close enough in time)
	for round := range 20 {
		col := array.NewSlice(whole, int64(round), int64(whole.Len()))
		rec := array.NewRecordBatch(asch, []arrow.Array{col}, int64(col.Len()))
		w, err := NewDataWriter(st, "t", sch, nil, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		adds, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
		diffRows(t, rowSet(t, got), rowSet(t, []arrow.RecordBatch{rec}))
		if len(adds) != 1 || !strings.Contains(adds[0].Stats, fmt.Sprintf(`"nullCount":{"id":%d}`, col.NullN())) {
			t.Errorf("round %d: files %d, stats %s; want one file with %d nulls", round, len(adds), adds[0].Stats, col.NullN())
		}
		rec.Release()
		col.Release()
	}
}
