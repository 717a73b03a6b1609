package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func spliceSchema() *delta.StructType {
	return &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: "long"}},
		{Name: "name", Type: &delta.PrimitiveType{Name: "string"}, Nullable: true},
		{Name: "city", Type: &delta.PrimitiveType{Name: "string"}, Nullable: true},
		{Name: "score", Type: &delta.PrimitiveType{Name: "double"}, Nullable: true},
		{Name: "at", Type: &delta.PrimitiveType{Name: "timestamp"}, Nullable: true},
		{Name: "flag", Type: &delta.PrimitiveType{Name: "boolean"}, Nullable: true},
	}}
}

var spliceT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// spliceRows builds rows of spliceSchema for ids; city(i) and score(i) give those
// columns (nil: null).
func spliceRows(t testing.TB, ids []int64, city func(int64) *string, score func(int64) *float64, flag func(int64) bool) arrow.RecordBatch {
	t.Helper()
	sch, err := delta.ArrowSchema(spliceSchema())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", id))
		if c := city(id); c != nil {
			b.Field(2).(*array.StringBuilder).Append(*c)
		} else {
			b.Field(2).AppendNull()
		}
		if s := score(id); s != nil {
			b.Field(3).(*array.Float64Builder).Append(*s)
		} else {
			b.Field(3).AppendNull()
		}
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(spliceT0.Add(time.Duration(id) * time.Minute).UnixMicro()))
		b.Field(5).(*array.BooleanBuilder).Append(flag(id))
	}
	return b.NewRecordBatch()
}

func baseCity(id int64) *string {
	if id%7 == 0 {
		return nil
	}
	c := fmt.Sprintf("city-%d", id%50)
	return &c
}

func baseScore(id int64) *float64 {
	s := float64(id % 1000)
	return &s
}

func baseFlag(id int64) bool { return id%2 == 0 }

// spliceTable is a table of spliceSchema (change feed on, partitioned by nothing) holding
// ids 0..n-1 in one file of many row groups, written by us or, given props, by
// pqarrow with those settings (a foreign file, with just numRecords for stats).
func spliceTable(t testing.TB, n int, props ...parquet.WriterProperty) *delta.Table {
	clock := newTestClock()
	return spliceTableOn(t, mem.New(mem.Config{Now: clock.Now}), "wh/t", clock, n, props...)
}

// spliceTableOn is spliceTable at root of st.
func spliceTableOn(t testing.TB, st objectstore.Store, root string, clock *testClock, n int, props ...parquet.WriterProperty) *delta.Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: spliceSchema(),
		Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, testOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	rec := spliceRows(t, ids, baseCity, baseScore, baseFlag)
	defer rec.Release()
	var adds []*delta.Add
	if props == nil {
		var parts []arrow.RecordBatch // written a part at a time: a row group each
		for lo := int64(0); lo < rec.NumRows(); lo += 1000 {
			parts = append(parts, rec.NewSlice(lo, min(lo+1000, rec.NumRows())))
			defer parts[len(parts)-1].Release()
		}
		if adds, err = delta.WriteRecords(ctx, st, root, spliceSchema(), nil, parts, delta.WriteOptions{RowGroupSize: 16 << 10}); err != nil {
			t.Fatal(err)
		}
	} else {
		sch := rec.Schema()
		if sch.Field(5).Name == "flag" { // flag has no nulls: stored REQUIRED, unlike what the table says
			fs := sch.Fields()
			fs[5].Nullable = false
			sch = arrow.NewSchema(fs, nil)
		}
		var buf bytes.Buffer
		w, err := pqarrow.NewFileWriter(sch, &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(array.NewRecordBatch(sch, rec.Columns(), rec.NumRows())); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, root+"/part-foreign.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
			t.Fatal(err)
		}
		adds = []*delta.Add{{Path: "part-foreign.parquet", PartitionValues: map[string]*string{}, Size: int64(buf.Len()),
			DataChange: true, Stats: fmt.Sprintf(`{"numRecords":%d}`, n)}}
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// allRows is every row of the latest version, all columns, sorted.
func allRows(t testing.TB, tbl *delta.Table, filter expr.Predicate) []string {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			parts := make([]string, rec.NumCols())
			for c := range parts {
				parts[c] = rec.ColumnName(c) + "=" + cellString(rec.Column(c), i)
			}
			out = append(out, strings.Join(parts, " "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// rowGroupChunks returns, per row group, the bytes of each column chunk of a data file.
func rowGroupChunks(t testing.TB, tbl *delta.Table, a *delta.Add) [][][]byte {
	t.Helper()
	rc, err := tbl.Store().Get(context.Background(), tbl.Root()+"/"+a.Path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", a.Path, err)
	}
	defer pf.Close()
	var out [][][]byte
	for rg := range pf.NumRowGroups() {
		md := pf.MetaData().RowGroup(rg)
		var cols [][]byte
		for c := range md.NumColumns() {
			cc, err := md.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			lo := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
				lo = cc.DictionaryPageOffset()
			}
			cols = append(cols, data[lo:lo+cc.TotalCompressedSize()])
		}
		out = append(out, cols)
	}
	return out
}

// A MERGE by positions, given the matched rows, into a table without deletion vectors
// splices the updated values into a copy of each file: the new file keeps the old one's
// row groups, copies the chunks of the columns whose values do not change byte for byte,
// and holds exactly what rewriting the file would (rows, change feed, counts, stats that
// data skipping can trust).
func TestMergeSpliceMatchesRewrite(t *testing.T) {
	newCity := func(id int64) *string {
		switch {
		case id%3 == 0:
			return nil // to NULL (or NULL again)
		case id%7 == 0:
			c := "from-null"
			return &c
		}
		c := fmt.Sprintf("moved-%d", id)
		return &c
	}
	for _, tc := range []struct {
		name    string
		set     map[string]any // nil: UPDATE SET *
		city    func(int64) *string
		score   func(int64) *float64
		flag    func(int64) bool
		changed []string // the columns whose chunks are encoded anew
		delete  bool     // some given rows are deleted: the file is rewritten
	}{
		{name: "two columns", set: map[string]any{"city": expr.Col("source.city"), "score": expr.Col("source.score")},
			city: newCity, score: highScoreOf, flag: baseFlag, changed: []string{"city", "score"}},
		{name: "set all, one column differs", city: baseCity, score: baseScore, flag: func(id int64) bool { return !baseFlag(id) },
			changed: []string{"flag"}},
		{name: "set all, nothing differs", city: baseCity, score: baseScore, flag: baseFlag},
		{name: "with deletes", set: map[string]any{"score": expr.Col("source.score")}, city: baseCity, score: highScoreOf, flag: baseFlag,
			delete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spliced, rewritten := spliceTable(t, 6000), spliceTable(t, 6000)
			var ids []int64
			for id := int64(5); id < 6000; id += 9 {
				ids = append(ids, id)
			}
			ids = append(ids, 7000, 7001) // inserted
			src := spliceRows(t, ids, tc.city, tc.score, tc.flag)
			defer src.Release()
			opts := func() delta.MergeOptions {
				upd := delta.MergeClause{Action: delta.MergeUpdate, Set: tc.set}
				o := delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"},
					WhenMatched:    []delta.MergeClause{upd},
					WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}}
				if tc.delete {
					o.WhenMatched = []delta.MergeClause{{CondFunc: func(r arrow.RecordBatch) ([]bool, error) {
						ids := r.Column(r.Schema().FieldIndices("source.id")[0]).(*array.Int64)
						out := make([]bool, ids.Len())
						for i := range out {
							out[i] = ids.Value(i)%5 == 0
						}
						return out, nil
					}, Action: delta.MergeDelete}, upd}
				}
				return o
			}
			_, _, old, repl := mergeBothWays(t, spliced, rewritten, src, opts)
			oldChunks := rowGroupChunks(t, spliced, old)
			switch {
			case tc.delete:
				if repl != nil && len(rowGroupChunks(t, spliced, repl)) == len(oldChunks) {
					t.Errorf("with deletes the file was spliced: %d row groups", len(oldChunks))
				}
				return
			case tc.changed == nil:
				if repl == nil || repl.Path != old.Path {
					t.Errorf("nothing changed, yet the file was replaced")
				}
				return
			case repl == nil || repl.Path == old.Path:
				t.Fatalf("no file replaced %s", old.Path)
			}
			newChunks := rowGroupChunks(t, spliced, repl)
			if len(oldChunks) < 3 || len(newChunks) != len(oldChunks) {
				t.Fatalf("%d row groups after the splice, %d before (want the same, several)", len(newChunks), len(oldChunks))
			}
			names := []string{"id", "name", "city", "score", "at", "flag"}
			for rg := range oldChunks {
				for c, name := range names {
					same := bytes.Equal(oldChunks[rg][c], newChunks[rg][c])
					if same == slices.Contains(tc.changed, name) {
						t.Errorf("row group %d column %s: chunk copied = %v, want %v", rg, name, same, !same)
					}
				}
			}
			// The stats describe the new values: a filter on them does not skip the file.
			if tc.set != nil {
				hits := allRows(t, spliced, expr.Gt("score", 4999.0))
				if len(hits) != len(ids) {
					t.Errorf("score > 4999 finds %d rows, want %d", len(hits), len(ids))
				}
				var st struct {
					NumRecords int64
					MaxValues  map[string]any
					NullCount  map[string]int64
				}
				if err := json.Unmarshal([]byte(repl.Stats), &st); err != nil {
					t.Fatal(err)
				}
				if st.NumRecords != 6000 || st.MaxValues["score"] != 5000.0+5999 || st.MaxValues["name"] != "name-999" {
					t.Errorf("stats %s", repl.Stats)
				}
			}
		})
	}
}

func numRecords(a *delta.Add) (int64, bool) {
	var st struct{ NumRecords *int64 }
	if json.Unmarshal([]byte(a.Stats), &st) != nil || st.NumRecords == nil {
		return 0, false
	}
	return *st.NumRecords, true
}

// mergeBothWays runs the MERGE opts on two tables of the same rows in one file: on
// spliced by positions with the matched rows given (so it splices when it can), on
// rewritten by the key join (which rewrites). Both must end with the same rows and
// change feed, and count the same. It returns their results, the file the tables held,
// and the file that replaced it in spliced (nil: none did; old itself: it stayed).
func mergeBothWays(t *testing.T, spliced, rewritten *delta.Table, src arrow.RecordBatch, opts func() delta.MergeOptions) (got, want *delta.MergeResult, old, repl *delta.Add) {
	t.Helper()
	ctx := context.Background()
	var err error
	want, err = rewritten.Merge(ctx, opts())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := spliced.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old = snap.Files()[0]
	o := opts()
	o.Tx = spliced.NewTransaction(snap, delta.TxOptions{})
	o.Positions = positionsOf(t, snap, src)
	for path, fm := range o.Positions.Files {
		defer giveRows(t, snap, path, fm, 100)()
	}
	got, err = spliced.Merge(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := allRows(t, spliced, nil), allRows(t, rewritten, nil); !slices.Equal(g, w) || len(g) != int(want.NumOutputRows) {
		t.Fatalf("rows after the splice differ from the rewrite's (%d and %d rows)", len(g), len(w))
	}
	cols := []string{"id", "name", "city", "score", "at", "flag", "_change_type"}
	gotCh, err := spliced.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(got.Version), EndVersion: ptr(got.Version)})
	if err != nil {
		t.Fatal(err)
	}
	wantCh, err := rewritten.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(want.Version), EndVersion: ptr(want.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := changeRows(t, gotCh, cols), changeRows(t, wantCh, cols); !slices.Equal(g, w) || len(g) < 1000 {
		t.Errorf("change feed of the splice (%d rows) differs from the rewrite's (%d rows)", len(g), len(w))
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("first difference:\n%s\n%s", g[i], w[i])
			}
		}
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"updated", got.NumTargetRowsUpdated, want.NumTargetRowsUpdated}, {"copied", got.NumTargetRowsCopied, want.NumTargetRowsCopied},
		{"inserted", got.NumTargetRowsInserted, want.NumTargetRowsInserted}, {"deleted", got.NumTargetRowsDeleted, want.NumTargetRowsDeleted},
		{"output", got.NumOutputRows, want.NumOutputRows},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	after, err := spliced.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live, _ := numRecords(old)
	for _, a := range after.Files() {
		if n, _ := numRecords(a); n == live-want.NumTargetRowsDeleted {
			repl = a
		}
	}
	return got, want, old, repl
}

// Files other writers wrote are spliced when their changed columns are stored as ours
// would be, whatever else differs (data page v2, codecs, no dictionary, no stats, a page
// index and bloom filters, which a spliced file drops), and rewritten otherwise (here:
// flag stored REQUIRED while the table says nullable). Either way the table ends as a
// rewrite leaves it.
func TestMergeSpliceForeignFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		props  []parquet.WriterProperty
		column string // the column the MERGE changes
		splice bool
	}{
		{"v2 pages, zstd, page index, bloom filters", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2),
			parquet.WithCompression(compress.Codecs.Zstd), parquet.WithPageIndexEnabled(true), parquet.WithBloomFilterEnabled(true),
			parquet.WithMaxRowGroupLength(1000), parquet.WithDataPageSize(1 << 10)}, "score", true},
		{"plain, gzip, no stats", []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithCompression(compress.Codecs.Gzip),
			parquet.WithStats(false), parquet.WithMaxRowGroupLength(1500)}, "city", true},
		{"column stored otherwise", []parquet.WriterProperty{parquet.WithMaxRowGroupLength(1000)}, "flag", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spliced, rewritten := spliceTable(t, 6000, tc.props...), spliceTable(t, 6000, tc.props...)
			var ids []int64
			for id := int64(3); id < 6000; id += 4 {
				ids = append(ids, id)
			}
			city := func(id int64) *string { c := fmt.Sprintf("c%d", id%5); return &c }
			flag := func(id int64) bool { return !baseFlag(id) }
			src := spliceRows(t, ids, city, highScoreOf, flag)
			defer src.Release()
			opts := func() delta.MergeOptions {
				return delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"}, WhenMatched: []delta.MergeClause{
					{Action: delta.MergeUpdate, Set: map[string]any{tc.column: expr.Col("source." + tc.column)}}}}
			}
			_, _, old, repl := mergeBothWays(t, spliced, rewritten, src, opts)
			if repl == nil || repl.Path == old.Path {
				t.Fatalf("no file replaced %s", old.Path)
			}
			before, after := rowGroupChunks(t, spliced, old), rowGroupChunks(t, spliced, repl)
			if got := len(after) == len(before) && bytes.Equal(after[0][0], before[0][0]); got != tc.splice {
				t.Errorf("spliced = %v (row groups %d, then %d), want %v", got, len(before), len(after), tc.splice)
			}
		})
	}
}

func highScoreOf(id int64) *float64 { s := 5000 + float64(id); return &s }

// In a partitioned table the spliced file stays in its partition's directory; a row
// that moves to another partition makes the MERGE rewrite its file instead.
func TestMergeSplicePartitioned(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    []row
		splice bool
	}{
		{"same partition", []row{{1, "an", "a"}, {2, "bo", "a"}}, true}, // a rewrite would put 3 first
		{"moves partition", []row{{2, "bo", "a"}, {3, "cy", "b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}, {4, "dee", "b"}}}
			spliced, rewritten := cdfTable(t, commits...), cdfTable(t, commits...)
			src := sourceRecord(tc.src, []string{"U", "U"})
			defer src.Release()
			want, err := rewritten.Merge(ctx, upsertOptions(src))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := spliced.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			opts := upsertOptions(src)
			opts.Tx = spliced.NewTransaction(snap, delta.TxOptions{})
			opts.Positions = positionsOf(t, snap, src)
			var old string
			for path, fm := range opts.Positions.Files {
				old = path
				defer giveRows(t, snap, path, fm, 0)()
			}
			got, err := spliced.Merge(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := latestRows(t, spliced), latestRows(t, rewritten); !slices.Equal(g, w) || len(g) != 4 {
				t.Errorf("rows %v, want %v", g, w)
			}
			if g, w := versionChanges(t, spliced, got.Version), versionChanges(t, rewritten, want.Version); !slices.Equal(g, w) || len(g) != 4 {
				t.Errorf("change feed %v, want %v", g, w)
			}
			after, err := spliced.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			oldChunks := rowGroupChunks(t, spliced, &delta.Add{Path: old})
			spliceSeen := false
			for _, a := range after.Files() {
				if !strings.HasPrefix(a.Path, "part=a/") || a.Path == old {
					continue
				}
				if *a.PartitionValues["part"] != "a" {
					t.Errorf("%s has partition values %v", a.Path, a.PartitionValues)
				}
				// The id column is copied when the file is spliced.
				spliceSeen = spliceSeen || bytes.Equal(rowGroupChunks(t, spliced, a)[0][0], oldChunks[0][0])
			}
			if spliceSeen != tc.splice {
				t.Errorf("spliced = %v, want %v", spliceSeen, tc.splice)
			}
		})
	}
}

// On S3 (the test MinIO) the splice reads the old file by ranged reads and streams the
// new one as a multipart upload: the same table as a rewrite, the file spliced.
func TestMergeSpliceOnS3(t *testing.T) {
	st := testenv.S3Store(t)
	defer delta.ForceRangedReads()()
	clock := newTestClock()
	spliced := spliceTableOn(t, st, "spliced", clock, 6000)
	rewritten := spliceTableOn(t, st, "rewritten", clock, 6000)
	var ids []int64
	for id := int64(1); id < 6000; id += 5 {
		ids = append(ids, id)
	}
	src := spliceRows(t, ids, baseCity, highScoreOf, baseFlag)
	defer src.Release()
	opts := func() delta.MergeOptions {
		return delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"}, WhenMatched: []delta.MergeClause{
			{Action: delta.MergeUpdate, Set: map[string]any{"score": expr.Col("source.score")}}}}
	}
	_, _, old, repl := mergeBothWays(t, spliced, rewritten, src, opts)
	if repl == nil || repl.Path == old.Path {
		t.Fatalf("no file replaced %s", old.Path)
	}
	before, after := rowGroupChunks(t, spliced, old), rowGroupChunks(t, spliced, repl)
	if len(after) != len(before) || len(before) < 3 || !bytes.Equal(after[1][1], before[1][1]) || bytes.Equal(after[1][3], before[1][3]) {
		t.Errorf("not spliced: %d row groups, then %d", len(before), len(after))
	}
}
