package parquet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// TestRLEMatchesArrowGo encodes level sequences of every shape (runs shorter and longer
// than a group, runs across group boundaries, long literal stretches past 63 groups,
// short tails) with rleEncoder and with arrow-go's level encoder (through a column
// writer's page, whose definition levels are arrow-go's RLE): same bytes.
func TestRLEMatchesArrowGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 300 {
		var levels []int16
		size := 1 + rng.IntN(3000)
		for len(levels) < size {
			v := int16(rng.IntN(2))
			run := 1 + rng.IntN([]int{1, 3, 9, 40, 700}[rng.IntN(5)])
			if n%3 == 0 { // long literal stretches: runs too short for a repeated run
				run = 1 + rng.IntN(3)
			}
			for range run {
				levels = append(levels, v)
			}
		}
		levels = levels[:size]
		var e rleEncoder
		e.reset(nil, 1)
		for i := 0; i < len(levels); {
			j := i + 1
			for j < len(levels) && levels[j] == levels[i] && n%2 == 0 {
				j++
			}
			if j-i > 1 {
				e.putRun(uint64(levels[i]), j-i)
			} else {
				e.put(uint64(levels[i]))
			}
			i = j
		}
		got := e.flush()
		want := arrowLevels(t, levels)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (%d levels): got %x\nwant %x", n, len(levels), got, want)
		}
	}
}

// arrowLevels returns arrow-go's RLE encoding of levels (max level 1), taken from the
// definition levels of a one-page optional column it writes uncompressed.
func arrowLevels(t *testing.T, levels []int16) []byte {
	t.Helper()
	data := writeOptionalInt32(t, levels)
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pr, err := r.RowGroup(0).GetColumnPageReader(0)
	if err != nil {
		t.Fatal(err)
	}
	for pr.Next() {
		if p, ok := pr.Page().(*file.DataPageV1); ok {
			b := p.Data()
			n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24
			return append([]byte(nil), b[4:4+n]...)
		}
	}
	t.Fatal(fmt.Errorf("no data page: %v", pr.Err()))
	return nil
}

// writeOptionalInt32 writes one optional INT32 column whose definition levels are
// levels (value 7 where defined), one page, uncompressed.
func writeOptionalInt32(t *testing.T, levels []int16) []byte {
	t.Helper()
	sc := mustOptionalInt32Schema(t)
	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, sc, file.WithWriterProps(parquet.NewWriterProperties(
		parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(1<<30), parquet.WithBatchSize(1<<30))))
	rg := w.AppendRowGroup()
	cw, err := rg.NextColumn()
	if err != nil {
		t.Fatal(err)
	}
	var vals []int32
	for _, l := range levels {
		if l == 1 {
			vals = append(vals, 7)
		}
	}
	if _, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch(vals, levels, nil); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustOptionalInt32Schema(t *testing.T) *schema.GroupNode {
	t.Helper()
	root, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, schema.FieldList{
		schema.NewInt32Node("v", parquet.Repetitions.Optional, -1),
	}, -1)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// The decoder reads what the encoder wrote, in random chunks each taken either by
// repeats (when it says the chunk is one run of that value) or by read.
func TestRLEDecoderRepeats(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		var levels []uint32
		for len(levels) < 2000 {
			v := uint32(rng.IntN(2))
			for range 1 + rng.IntN([]int{2, 9, 40, 700}[rng.IntN(4)]) {
				levels = append(levels, v)
			}
		}
		var e rleEncoder
		e.reset(nil, 1)
		for _, v := range levels {
			e.put(uint64(v))
		}
		var d rleDecoder
		d.reset(e.flush(), 1)
		for at := 0; at < len(levels); {
			k := min(1+rng.IntN(60), len(levels)-at)
			v := uint32(rng.IntN(2))
			all, err := d.repeats(k, v)
			if err != nil {
				t.Fatal(err)
			}
			if all {
				for j, l := range levels[at : at+k] {
					if l != v {
						t.Fatalf("repeats(%d, %d) at %d: level %d is %d", k, v, at, at+j, l)
					}
				}
			} else {
				got := make([]uint32, k)
				if err := d.read(got); err != nil {
					t.Fatal(err)
				}
				for j, l := range levels[at : at+k] {
					if got[j] != l {
						t.Fatalf("read at %d: %d, want %d", at+j, got[j], l)
					}
				}
			}
			at += k
		}
	}
}
