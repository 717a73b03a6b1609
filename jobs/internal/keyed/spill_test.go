package keyed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/spilldir"
)

// A run's spill directory names its owner: a sweep leaves it while this process runs.
func TestDirHasAnOwner(t *testing.T) {
	base := t.TempDir()
	d, err := NewDir(base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if !strings.HasPrefix(filepath.Base(d.path), spilldir.Prefix) {
		t.Errorf("spill directory %s", d.path)
	}
	removed, err := spilldir.Sweep(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) > 0 {
		t.Fatalf("a sweep removed the live run's spill directory: %v", removed)
	}
	if _, err := os.Stat(d.path); err != nil {
		t.Fatal(err)
	}
}

// A joining fanout sets aside a range's rows of several records as one spill record,
// in the order they were written; a plain one writes a spill record per record. Either
// way a range keeps its rows in order (records larger than a file's buffer too) and is
// read any number of times, in any order.
func TestFanoutJoins(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		join bool
		rows int
	}{{false, 100}, {true, 100}, {false, 5000}, {true, 5000}} {
		join := c.join
		dir, err := NewDir(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFanout(dir, testSchema)
		if join {
			f.Join()
		}
		want := make([][]string, 3)
		for r := range 10 {
			var rows [][2]any
			var ranges []uint16
			for i := range c.rows {
				rows = append(rows, [2]any{fmt.Sprintf("k%d", r*c.rows+i), r})
				ranges = append(ranges, uint16((r+i)%3))
			}
			rec := testRecord(int64(r*c.rows), rows...)
			got := rowsOf(rec)
			for i, p := range ranges {
				want[p] = append(want[p], got[i])
			}
			if err := f.Write(ctx, rec, ranges); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := f.Finish(); err != nil {
			t.Fatal(err)
		}
		for _, p := range []int{2, 0, 1, 2} {
			var got []string
			recs := 0
			if err := Each(ctx, f.Parts(p, p+1), func(rec arrow.RecordBatch) error {
				recs++
				got = append(got, rowsOf(rec)...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[p]) {
				t.Errorf("join %v, %d rows a record, range %d: %d rows %.3v, want %d %.3v", join, c.rows, p, len(got), got, len(want[p]), want[p])
			}
			wantRecs := map[bool]int{false: 10, true: 1}[join]
			if join && c.rows > 100 {
				wantRecs = 5 // (two records come to the join size)
			}
			if recs != wantRecs {
				t.Errorf("join %v, %d rows a record, range %d: %d spill records, want %d", join, c.rows, p, recs, wantRecs)
			}
			if f.PartRows(p) != int64(len(want[p])) {
				t.Errorf("join %v, range %d: %d rows counted, want %d", join, p, f.PartRows(p), len(want[p]))
			}
		}
		dir.Remove()
	}
}

// Each reads its files ahead of fn, in order: every record once, file after file; an
// error of fn stops the reading and is what Each returns (fn is not called again), and
// a file that cannot be read fails Each after fn had the records of the files before.
func TestEachReadsAheadInOrder(t *testing.T) {
	ctx := context.Background()
	dir, err := NewDir(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Remove()
	var files []*File
	var want []string
	for k := range 3 {
		f, err := dir.Create(testSchema)
		if err != nil {
			t.Fatal(err)
		}
		for r := range 20 {
			rec := testRecord(int64(k*100+r), [2]any{fmt.Sprintf("f%d-r%d", k, r), r})
			want = append(want, rowsOf(rec)...)
			if err := f.Write(rec, 1); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := f.Finish(); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var parts []*Part
	for _, f := range files {
		parts = append(parts, f.Part())
	}
	var got []string
	if err := Each(ctx, parts, func(rec arrow.RecordBatch) error {
		got = append(got, rowsOf(rec)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("read %d rows %.3v, want %d %.3v", len(got), got, len(want), want)
	}

	stop := errors.New("stop")
	calls := 0
	err = Each(ctx, parts, func(rec arrow.RecordBatch) error {
		if calls++; calls == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 5 {
		t.Errorf("fn failing on its 5th record: Each returned %v after %d calls, want stop after 5", err, calls)
	}

	if err := os.Remove(files[2].path); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	err = Each(ctx, parts, func(rec arrow.RecordBatch) error {
		got = append(got, rowsOf(rec)...)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "spill file") {
		t.Errorf("a file gone: Each returned %v, want its spill file error", err)
	}
	if !slices.Equal(got, want[:40]) {
		t.Errorf("a file gone: fn had %d rows before the error, want the 40 of the files before it", len(got))
	}
}

// A fanout's ranges share one file on disk (its creation is the only one, however many
// ranges get rows), each range read back as its own rows in order; a schema with a
// dictionary column gets a file per range, read back alike.
func TestFanoutOneFile(t *testing.T) {
	ctx := context.Background()
	dictSchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
	}, nil)
	for _, dict := range []bool{false, true} {
		dir, err := NewDir(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		schema := testSchema
		if dict {
			schema = dictSchema
		}
		f := NewFanout(dir, schema)
		want := make([][]string, Ranges)
		for r := range 3 {
			var rec arrow.RecordBatch
			var ids []string
			for i := range 2 * Ranges {
				ids = append(ids, fmt.Sprintf("k%d-%d", r, i))
			}
			if dict {
				b := array.NewDictionaryBuilder(memory.DefaultAllocator, dictSchema.Field(0).Type.(*arrow.DictionaryType)).(*array.BinaryDictionaryBuilder)
				for _, id := range ids {
					if err := b.AppendString(id); err != nil {
						t.Fatal(err)
					}
				}
				arr := b.NewArray()
				b.Release()
				rec = array.NewRecordBatch(dictSchema, []arrow.Array{arr}, int64(len(ids)))
				arr.Release()
			} else {
				var rows [][2]any
				for i, id := range ids {
					rows = append(rows, [2]any{id, i})
				}
				rec = testRecord(int64(r*1000), rows...)
			}
			ranges := make([]uint16, len(ids))
			for i, id := range ids {
				ranges[i] = uint16(i % Ranges)
				want[i%Ranges] = append(want[i%Ranges], id)
			}
			if err := f.Write(ctx, rec, ranges); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := f.Finish(); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir.path, "*.arrows"))
		if wantFiles := map[bool]int{false: 1, true: Ranges}[dict]; len(files) != wantFiles {
			t.Errorf("dictionary %v: %d spill files for %d ranges, want %d", dict, len(files), Ranges, wantFiles)
		}
		read := func(lo, hi int) []string {
			var got []string
			if err := Each(ctx, f.Parts(lo, hi), func(rec arrow.RecordBatch) error {
				for i := range int(rec.NumRows()) {
					got = append(got, rec.Column(0).ValueStr(i))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return got
		}
		for _, p := range []int{Ranges - 1, 0, 77, 0} {
			if got := read(p, p+1); !slices.Equal(got, want[p]) {
				t.Errorf("dictionary %v, range %d: read %v, want %v", dict, p, got, want[p])
			}
			if f.PartRows(p) != int64(len(want[p])) {
				t.Errorf("dictionary %v, range %d: %d rows counted, want %d", dict, p, f.PartRows(p), len(want[p]))
			}
		}
		// Several ranges at once: range after range (in the shared file, one part).
		if parts := f.Parts(3, 77); dict && len(parts) != 74 || !dict && len(parts) != 1 {
			t.Errorf("dictionary %v: %d parts for 74 ranges", dict, len(parts))
		}
		if got, all := read(3, 77), slices.Concat(want[3:77]...); !slices.Equal(got, all) {
			t.Errorf("dictionary %v, ranges [3, 77): read %d rows, want %d in range order", dict, len(got), len(all))
		}
		dir.Remove()
	}
}
