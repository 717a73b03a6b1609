package parquet

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// A footer whose chunks overlap, leave gaps or leave the file is not spliced
// (CheckChunks), so a splice never copies bytes that are not exactly one chunk's pages.
func TestSpliceChecksChunkLayout(t *testing.T) {
	rec := stringsTestRecord(t, 3000, 1)
	defer rec.Release()
	data := parquetBytes(t, rec, 1000)
	size := int64(len(data))
	read := func() *Footer {
		f, ok, err := ReadFooter(bytes.NewReader(data), size)
		if err != nil || !ok {
			t.Fatalf("ReadFooter: %v, %v", ok, err)
		}
		return f
	}
	if f := read(); !f.CheckChunks(size) || len(f.rowGroups()) != 3 {
		t.Fatalf("a file as written: CheckChunks false or %d row groups", len(f.rowGroups()))
	}
	chunk := func(f *Footer, rg, col int) *tValue {
		return f.rowGroups()[rg].field(rgColumns).elems[col].field(ccMetaData)
	}
	for name, edit := range map[string]func(f *Footer){
		"overlap": func(f *Footer) {
			o, _ := chunk(f, 1, 0).int(cmDataPage)
			chunk(f, 1, 1).setInt(cmDataPage, tI64, o+1)
			chunk(f, 1, 1).drop(cmDictPage)
		},
		"past the footer": func(f *Footer) { chunk(f, 2, 1).setInt(cmCompressed, tI64, size) },
		"a page left out": func(f *Footer) {
			n, _ := chunk(f, 1, 0).int(cmCompressed)
			chunk(f, 1, 0).setInt(cmCompressed, tI64, n-1)
		},
		"in the magic": func(f *Footer) { chunk(f, 0, 0).setInt(cmDataPage, tI64, 1); chunk(f, 0, 0).drop(cmDictPage) },
		"no pages":     func(f *Footer) { chunk(f, 0, 1).drop(cmDataPage) },
		"other file": func(f *Footer) {
			cc := &f.rowGroups()[0].field(rgColumns).elems[0]
			cc.fields = append([]tField{{id: ccFilePath, v: tValue{typ: tBinary, b: []byte("x.parquet")}}}, cc.fields...)
		},
	} {
		if f := read(); func() bool { edit(f); return f.CheckChunks(size) }() {
			t.Errorf("%s: CheckChunks true", name)
		}
	}
}

// WriteSpliced makes a file whose replaced column is the spliced file's and whose other
// columns are the old file's, chunk bytes unchanged, over several row groups; the
// footer's offsets follow the new places, so any reader reads it.
func TestWriteSpliced(t *testing.T) {
	rec := stringsTestRecord(t, 3000, 2)
	defer rec.Release()
	old := parquetBytes(t, rec, 1000)
	// The new s column: every value changed, same row groups.
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	for i := range 3000 {
		if i%4 == 0 {
			sb.AppendNull()
		} else {
			sb.Append(fmt.Sprintf("spliced-%d", i))
		}
	}
	newS := sb.NewArray()
	sb.Release()
	defer newS.Release()
	encSchema := arrow.NewSchema([]arrow.Field{stringsTestSchema.Field(1)}, nil)
	encRec := array.NewRecordBatch(encSchema, []arrow.Array{newS}, 3000)
	defer encRec.Release()
	enc := parquetBytes(t, encRec, 1000)

	foot, ok, err := ReadFooter(bytes.NewReader(old), int64(len(old)))
	if err != nil || !ok || !foot.CheckChunks(int64(len(old))) {
		t.Fatalf("old footer: ok %v, err %v", ok, err)
	}
	encFoot, ok, err := ReadFooter(bytes.NewReader(enc), int64(len(enc)))
	if err != nil || !ok {
		t.Fatalf("spliced columns' footer: ok %v, err %v", ok, err)
	}
	if leaves := stringsTestSchema.NumFields(); foot.NumRowGroups() != 3 || encFoot.NumRowGroups() != 3 || foot.NumLeaves() != leaves || encFoot.NumLeaves() != 1 {
		t.Fatalf("row groups %d and %d, leaves %d and %d; want 3, 3, %d, 1",
			foot.NumRowGroups(), encFoot.NumRowGroups(), foot.NumLeaves(), encFoot.NumLeaves(), leaves)
	}
	for _, c := range []struct {
		leaf int
		want bool
	}{{0, false}, {1, true}, {2, false}, {3, false}} { // id is a long, r required, b binary
		if got := SameLeafType(foot, c.leaf, encFoot, 0); got != c.want {
			t.Errorf("SameLeafType(leaf %d, spliced s) = %v, want %v", c.leaf, got, c.want)
		}
	}
	var out bytes.Buffer
	size, err := WriteSpliced(&out, bytes.NewReader(old), foot, bytes.NewReader(enc), encFoot, map[int]int{1: 0})
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(out.Len()) {
		t.Errorf("WriteSpliced returned %d bytes, wrote %d", size, out.Len())
	}
	got, err := readColumns(t, out.Bytes(), nil, 0, true, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i, want := range []arrow.Array{rec.Column(0), newS, rec.Column(2), rec.Column(3)} {
		if !array.Equal(got.Column(i), want) {
			t.Errorf("column %s of the spliced file differs from the one spliced in", got.ColumnName(i))
		}
	}
	// Every chunk but s's is the old file's bytes.
	chunks := func(data []byte) map[[2]int][]byte {
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		out := map[[2]int][]byte{}
		for rg := range pf.NumRowGroups() {
			for c := range pf.MetaData().RowGroup(rg).NumColumns() {
				cc, _ := pf.MetaData().RowGroup(rg).ColumnChunk(c)
				lo := cc.DataPageOffset()
				if cc.HasDictionaryPage() && cc.DictionaryPageOffset() < lo {
					lo = cc.DictionaryPageOffset()
				}
				out[[2]int{rg, c}] = data[lo : lo+cc.TotalCompressedSize()]
			}
		}
		return out
	}
	before, after := chunks(old), chunks(out.Bytes())
	for k, b := range before {
		if k[1] != 1 && !bytes.Equal(after[k], b) {
			t.Errorf("row group %d column %d: chunk bytes changed", k[0], k[1])
		}
	}
}
