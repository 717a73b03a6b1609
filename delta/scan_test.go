package delta

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const pruneSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"country","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"day","type":"date","nullable":true,"metadata":{}}]}`

// pruneTable writes 12 files: for each country (US, FR, null) and each block of 100 ids
// (0..399), one file. Rows with id%10==0 have a null name.
func pruneTable(t *testing.T) (*mem.Store, *StructType, []*Add, []arrow.RecordBatch) {
	t.Helper()
	st := mem.New(mem.Config{})
	sch := mustSchema(t, pruneSchema)
	asch, _ := ArrowSchema(sch)
	var adds []*Add
	var all []arrow.RecordBatch
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, country := range []string{"US", "FR", ""} {
		for block := 0; block < 4; block++ {
			b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
			for id := block * 100; id < block*100+100; id++ {
				b.Field(0).(*array.Int64Builder).Append(int64(id))
				if country == "" {
					b.Field(1).AppendNull()
				} else {
					b.Field(1).(*array.StringBuilder).Append(country)
				}
				b.Field(2).(*array.Decimal128Builder).Append(decimalOf(int64(id) * 150)) // id * 1.50
				if id%10 == 0 {
					b.Field(3).AppendNull()
				} else {
					b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("name-%04d-%s", id, strings.Repeat("x", 40)))
				}
				ts := base.Add(time.Duration(id) * time.Hour).Add(time.Duration(id%7) * 123456 * time.Microsecond)
				b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
				b.Field(5).(*array.Date32Builder).Append(arrow.Date32FromTime(ts))
			}
			rec := b.NewRecordBatch()
			b.Release()
			a, err := WriteRecords(context.Background(), st, "t", sch, []string{"country"}, []arrow.RecordBatch{rec}, WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			adds = append(adds, a...)
			all = append(all, rec)
		}
	}
	return st, sch, adds, all
}

func TestScanPruning(t *testing.T) {
	st, sch, adds, all := pruneTable(t)
	if len(adds) != 12 {
		t.Fatalf("%d files, want 12", len(adds))
	}
	for _, tc := range []struct {
		where     string
		wantFiles int
		keep      func(id int64, country string, hasName bool) bool
	}{
		{"country = 'US'", 4, func(id int64, c string, _ bool) bool { return c == "US" }},
		{"country IS NULL", 4, func(id int64, c string, _ bool) bool { return c == "" }},
		{"country != 'US'", 4, func(id int64, c string, _ bool) bool { return c == "FR" }},
		{"id >= 350", 3, func(id int64, _ string, _ bool) bool { return id >= 350 }},
		{"id < 100 AND country = 'FR'", 1, func(id int64, c string, _ bool) bool { return id < 100 && c == "FR" }},
		{"id = 150 OR id = 399", 6, func(id int64, _ string, _ bool) bool { return id == 150 || id == 399 }},
		{"id IN (5, 205)", 6, func(id int64, _ string, _ bool) bool { return id == 5 || id == 205 }},
		{"amount > 450.00", 3, func(id int64, _ string, _ bool) bool { return id > 300 }},
		{"amount BETWEEN 0.5 AND 3", 3, func(id int64, _ string, _ bool) bool { return id >= 1 && id <= 2 }},
		{"name IS NULL", 12, func(id int64, _ string, hasName bool) bool { return !hasName }},
		{"name > 'name-0390'", 3, func(id int64, _ string, hasName bool) bool { return hasName && id >= 390 }},
		{"name = 'nope'", 0, func(int64, string, bool) bool { return false }},
		{"day = DATE '2024-03-02'", 3, func(id int64, _ string, _ bool) bool { return id >= 12 && id < 36 }},
		// Stats hold milliseconds: block 0's max (id 99) is 15:00:00.123456, stored as .123;
		// the reader must still read it for .1234 and may skip it only past .123999.
		{"ts >= TIMESTAMP '2024-03-05T15:00:00.123400Z'", 12, func(id int64, _ string, _ bool) bool { return id >= 99 }},
		{"ts > TIMESTAMP '2024-03-05T15:00:00.124Z'", 9, func(id int64, _ string, _ bool) bool { return id > 99 }},
		{"(country = 'US' OR country = 'FR') AND id < 10 AND name IS NOT NULL", 2,
			func(id int64, c string, hasName bool) bool { return c != "" && id < 10 && hasName }},
	} {
		t.Run(tc.where, func(t *testing.T) {
			pred, err := expr.Parse(tc.where)
			if err != nil {
				t.Fatal(err)
			}
			got, stats := scanAll(t, st, "t", sch, []string{"country"}, adds, ScanOptions{Filter: pred})
			if stats.FilesRead != tc.wantFiles {
				t.Errorf("read %d files (pruned %d), want %d", stats.FilesRead, stats.FilesPruned, tc.wantFiles)
			}
			var want []arrow.RecordBatch
			for _, rec := range all {
				ids := rec.Column(0).(*array.Int64)
				cs := rec.Column(1).(*array.String)
				var rows []int32
				for i := 0; i < int(rec.NumRows()); i++ {
					c := ""
					if cs.IsValid(i) {
						c = cs.Value(i)
					}
					if tc.keep(ids.Value(i), c, rec.Column(3).IsValid(i)) {
						rows = append(rows, int32(i))
					}
				}
				r, err := arrowx.Take(context.Background(), memory.DefaultAllocator, rec, rows)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, r)
			}
			diffRows(t, rowSet(t, got), rowSet(t, want))
		})
	}
}

func TestScanNeverPrunesFilesWithoutStats(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	var bare []*Add
	for _, a := range adds {
		c := *a
		c.Stats = ""
		bare = append(bare, &c)
	}
	got, stats := scanAll(t, st, "t", sch, []string{"country"}, bare, ScanOptions{Filter: expr.Gt("id", 390), Columns: []string{"id"}})
	if stats.FilesRead != 12 {
		t.Errorf("read %d files, want all 12", stats.FilesRead)
	}
	if rows := rowSet(t, got); len(rows) != 27 {
		t.Errorf("%d rows, want 27 (ids 391..399 in 3 countries)", len(rows))
	}
}

func TestScanProjectionAndSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	old := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}}]}`)
	// A file written with an extra _change_type column (as CDC files have) must not leak it.
	withCT := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}},{"name":"_change_type","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(withCT)
	rec := recordFromJSON(t, asch, `[{"id":1,"p":"a","_change_type":"insert"},{"id":2,"p":"b","_change_type":"insert"}]`)
	defer rec.Release()
	adds, err := WriteRecords(ctx, st, "t", withCT, []string{"p"}, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The table later gained a nullable column and a nested struct.
	evolved, _, err := MergeSchema(old, arrow.NewSchema([]arrow.Field{
		{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := scanAll(t, st, "t", evolved, []string{"p"}, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), []string{`{"extra":null,"id":1,"p":"a","st":null}`, `{"extra":null,"id":2,"p":"b","st":null}`})

	got, _ = scanAll(t, st, "t", evolved, []string{"p"}, adds, ScanOptions{Columns: []string{"P", "extra"}, Filter: expr.Eq("id", 2)})
	diffRows(t, rowSet(t, got), []string{`{"extra":null,"p":"b"}`})
	if got[0].Schema().Field(0).Name != "p" {
		t.Errorf("projected column named %q, want the schema's name p", got[0].Schema().Field(0).Name)
	}

	// Partition columns only: no data column is read, row counts still come out right.
	got, _ = scanAll(t, st, "t", evolved, []string{"p"}, adds, ScanOptions{Columns: []string{"p"}})
	diffRows(t, rowSet(t, got), []string{`{"p":"a"}`, `{"p":"b"}`})
}

func TestScanAbsoluteAndEncodedPaths(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"timestamp_ntz","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, `[{"id":1,"p":"2021-09-08T11:11:11"}]`)
	defer rec.Release()
	adds, err := WriteRecords(ctx, st, "db/t", sch, []string{"p"}, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(adds[0].Path, "p=2021-09-08%2011%253A11%253A11/") || *adds[0].PartitionValues["p"] != "2021-09-08 11:11:11" {
		t.Fatalf("path %s partitionValues %v", adds[0].Path, *adds[0].PartitionValues["p"])
	}
	abs := *adds[0]
	abs.Path = "s3://bucket/db/t/" + adds[0].Path
	got, _ := scanAll(t, st, "db/t", sch, []string{"p"}, []*Add{&abs}, ScanOptions{TableURI: "s3://bucket/db/t"})
	diffRows(t, rowSet(t, got), []string{`{"id":1,"p":"2021-09-08T11:11:11"}`})

	_, err = Scan(ctx, st, "db/t", sch, []string{"p"}, []*Add{&abs}, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := Scan(ctx, st, "db/t", sch, []string{"p"}, []*Add{&abs}, ScanOptions{})
	if _, err := ReadAll(sc); err == nil || !strings.Contains(err.Error(), "no location to resolve it") || strings.Contains(err.Error(), "TableURI") {
		t.Errorf("absolute path without TableURI: error %v", err)
	}
}

// TestScanRejectsBadFilter: a filter that does not fit the table's schema fails the scan
// and says which column and literal are wrong.
func TestScanRejectsBadFilter(t *testing.T) {
	sch := mustSchema(t, pruneSchema)
	for _, tc := range []struct{ where, wantErr string }{
		{"nope = 1", "column nope is not in the table schema"},
		{"id = 'abc'", `"abc" is not a valid long`},
		{"day > 'tomorrow'", `"tomorrow" is not a valid date`},
	} {
		p, _ := expr.Parse(tc.where)
		_, err := Scan(context.Background(), mem.New(mem.Config{}), "", sch, nil, nil, ScanOptions{Filter: p})
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("scan with %q: error %v, want %q", tc.where, err, tc.wantErr)
		}
	}
}

func decimalOf(unscaled int64) decimal128.Num { return decimal128.FromI64(unscaled) }

// countingStore counts ranged and whole-object reads (the reader reads columns
// concurrently).
type countingStore struct {
	*mem.Store
	gets, ranges atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.ranges.Add(1)
	return c.Store.GetRange(ctx, key, off, n)
}

func TestScanRangedReads(t *testing.T) {
	st, sch, adds, all := pruneTable(t)
	cs := &countingStore{Store: st}
	defer ForceRangedReads()()
	got, stats := scanAll(t, cs, "t", sch, []string{"country"}, adds, ScanOptions{Columns: []string{"id", "country", "amount", "name", "ts", "day"}})
	diffRows(t, rowSet(t, got), rowSet(t, all))
	if cs.gets.Load() != 0 || cs.ranges.Load() == 0 {
		t.Errorf("%d whole gets, %d ranged reads; want ranged reads only", cs.gets.Load(), cs.ranges.Load())
	}
	// Footer plus one read per column chunk: a handful per file, not one per page buffer.
	if per := int(cs.ranges.Load()) / stats.FilesRead; per > 10 {
		t.Errorf("%d ranged reads per file, want at most 10", per)
	}
}

// localStore counts how a local store's objects are read.
type localStore struct {
	*fs.Store
	gets, opens atomic.Int64
}

func (l *localStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	l.gets.Add(1)
	return l.Store.Get(ctx, key)
}

func (l *localStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	l.gets.Add(1)
	return l.Store.GetRange(ctx, key, off, n)
}

func (l *localStore) OpenReaderAt(ctx context.Context, key string) (objectstore.ReaderAtCloser, int64, error) {
	l.opens.Add(1)
	return l.Store.OpenReaderAt(ctx, key)
}

// Local files are read in place (pages where they lie), never fetched whole or by
// column chunk.
func TestScanReadsLocalFilesInPlace(t *testing.T) {
	ctx := context.Background()
	src, sch, adds, all := pruneTable(t)
	dst, err := fs.New(fs.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	infos, err := src.List(ctx, "t/", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		rc, err := src.Get(ctx, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		err = dst.Put(ctx, info.Key, rc, info.Size)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	ls := &localStore{Store: dst}
	got, stats := scanAll(t, ls, "t", sch, []string{"country"}, adds, ScanOptions{Columns: []string{"id", "country", "amount", "name", "ts", "day"}})
	diffRows(t, rowSet(t, got), rowSet(t, all))
	if ls.gets.Load() != 0 || int(ls.opens.Load()) != stats.FilesRead || stats.FilesRead == 0 {
		t.Errorf("%d gets, %d opens for %d files read; want one open per file and no get", ls.gets.Load(), ls.opens.Load(), stats.FilesRead)
	}
}

func TestScanNestedSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	old := mustSchema(t, `{"type":"struct","fields":[{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"n","type":"integer","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(old)
	rec := recordFromJSON(t, asch, `[{"st":{"a":1},"n":1},{"st":null,"n":2}]`)
	defer rec.Release()
	adds, err := WriteRecords(ctx, st, "", old, nil, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Later: st gained field b, and n was widened from integer to long.
	evolved := mustSchema(t, `{"type":"struct","fields":[{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"n","type":"long","nullable":true,"metadata":{}}]}`)
	got, _ := scanAll(t, st, "", evolved, nil, adds, ScanOptions{Filter: expr.Ge("n", int64(1))})
	diffRows(t, rowSet(t, got), []string{`{"n":1,"st":{"a":1,"b":null}}`, `{"n":2,"st":null}`})
}

func TestScanFilterNestedColumns(t *testing.T) {
	sch := mustSchema(t, allTypesSchema)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, allTypesRows)
	defer rec.Release()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(context.Background(), st, "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		where string
		ids   []int64
	}{
		{"id != 1 AND id != 2", []int64{3, 4}},
		{"b = true", []int64{1, 4}},
		{"id = 1 OR id = 3", []int64{1, 3}},
		{"s > 'b' AND (bin IS NULL OR bin != '')", []int64{4}},
		{"st.y.z = 'zz'", []int64{1}},
		{"st.x IS NULL", []int64{2, 3}},
		{"dec38 < 0 OR f = 4", []int64{3, 4}},
		{"ntz < TIMESTAMP '2000-01-01 00:00:00' OR bin = ''", []int64{3}},
		{"b = false OR ts >= '2024-01-31T10:11:12.345678Z'", []int64{1, 3}},
	} {
		t.Run(tc.where, func(t *testing.T) {
			p, err := expr.Parse(tc.where)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := scanAll(t, st, "", sch, nil, adds, ScanOptions{Filter: p})
			var want []string
			for _, r := range rowSet(t, []arrow.RecordBatch{rec}) {
				for _, id := range tc.ids {
					if strings.Contains(r, fmt.Sprintf(`"id":%d,`, id)) {
						want = append(want, r)
					}
				}
			}
			diffRows(t, rowSet(t, got), want)
		})
	}
}

func TestScanPrunesRowGroups(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"d","type":"date","nullable":true,"metadata":{}},{"name":"amt","type":"decimal(9,2)","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	var recs []arrow.RecordBatch
	for b := 0; b < 8; b++ {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := b * 1000; i < b*1000+1000; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(i))
			rb.Field(1).(*array.Date32Builder).Append(arrow.Date32(19000 + i/100))
			rb.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i)))
			rb.Field(3).(*array.StringBuilder).Append(fmt.Sprint(i))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(ctx, st, "", sch, nil, recs, WriteOptions{RowGroupSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) != 1 {
		t.Fatalf("%d files, want 1", len(adds))
	}
	for _, where := range []string{"id >= 7500", "d = DATE '2022-01-08'", "amt < 5.00", "id = 3000 OR s = '9'", "s >= '7500' AND s < '7600'"} {
		t.Run(where, func(t *testing.T) {
			p, _ := expr.Parse(where)
			got, stats := scanAll(t, st, "", sch, nil, adds, ScanOptions{Filter: p})
			bp, _ := bindPredicate(p, sch)
			var want []arrow.RecordBatch
			for _, r := range recs {
				rows, _, _ := bp.KeptRows(r)
				k, _ := arrowx.Take(ctx, memory.DefaultAllocator, r, rows)
				want = append(want, k)
			}
			diffRows(t, rowSet(t, got), rowSet(t, want))
			if stats.RowGroupsPruned == 0 {
				t.Errorf("no row group pruned")
			}
		})
	}
}
