package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// failingPut is a mem store whose Put reads limit bytes and then fails.
type failingPut struct {
	*mem.Store
	limit int64
}

var errPutBroke = errors.New("put broke")

func (s failingPut) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if _, err := io.CopyN(io.Discard, r, s.limit); err != nil {
		return err
	}
	return errPutBroke
}

// TestStreamSink writes through a stream sink in writes of many sizes: the object is the
// bytes written, in order; a released sink publishes nothing; a Put that fails part way
// fails the writes and the upload with its error.
func TestStreamSink(t *testing.T) {
	ctx := context.Background()
	var want bytes.Buffer
	const block = 1 << 20
	for i := range 3*block + 12345 {
		want.WriteByte(byte(i * 7919 >> 3))
	}
	st := mem.New(mem.Config{})
	s := newStreamSink(ctx, st, "t/a")
	for p := want.Bytes(); len(p) > 0; {
		n := min(len(p), 1+len(p)%(block+777), 3*block/2)
		if _, err := s.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if s.len() != int64(want.Len()) {
		t.Errorf("len %d, want %d", s.len(), want.Len())
	}
	if err := s.upload(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "t/a")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the object has %d bytes, not the %d written", len(got), want.Len())
	}

	s = newStreamSink(ctx, st, "t/b")
	s.Write(want.Bytes())
	s.release()
	if _, err := st.Stat(ctx, "t/b"); err == nil {
		t.Error("a released sink published its object")
	}

	s = newStreamSink(ctx, failingPut{st, 1000}, "t/c")
	var werr error
	for range 100 {
		if _, werr = s.Write(want.Bytes()[:block]); werr != nil {
			break
		}
	}
	uerr := s.upload(ctx, st, "")
	if !errors.Is(werr, errPutBroke) || !errors.Is(uerr, errPutBroke) {
		t.Errorf("after a Put failed: write error %v, upload error %v; want the Put's error", werr, uerr)
	}
}

// The string columns' min and max that a data file's stats take from the Parquet
// writer equal those folded from the rows written: several row groups, nulls, a
// column of one value, dictionary and plain pages, values past 32 characters,
// multi-byte characters, empty strings.
func TestStringStatsFromWriter(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"string","nullable":true,"metadata":{}},{"name":"city","type":"string","nullable":true,"metadata":{}},{"name":"same","type":"string","nullable":true,"metadata":{}},{"name":"n","type":"long","nullable":true,"metadata":{}},{"name":"none","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	r := rand.New(rand.NewPCG(3, 4))
	var recs []arrow.RecordBatch
	for b := range 6 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := range 3000 {
			switch {
			case r.IntN(50) == 0:
				rb.Field(0).AppendNull()
			case r.IntN(100) == 0:
				rb.Field(0).(*array.StringBuilder).Append("")
			default:
				rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d-%s", strings.Repeat("é", r.IntN(3)), r.IntN(1_000_000), strings.Repeat("z", r.IntN(40))))
			}
			rb.Field(1).(*array.StringBuilder).Append([]string{"Leeds", "Rome", "Åre", "Zürich", "Oslo"}[r.IntN(5)])
			rb.Field(2).(*array.StringBuilder).Append("/landing/c/one-file-for-every-row.csv")
			rb.Field(3).(*array.Int64Builder).Append(int64(b*3000 + i))
			rb.Field(4).AppendNull()
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	folded := newFileStats(sch, -1)
	for _, rec := range recs {
		folded.update(rec)
	}
	w, err := NewDataWriter(mem.New(mem.Config{}), "t", sch, nil, WriteOptions{RowGroupSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(context.Background())
	if err != nil || len(adds) != 1 {
		t.Fatalf("%d files, %v", len(adds), err)
	}
	if adds[0].Stats != folded.JSON() {
		t.Errorf("stats from the writer:\n%s\nfolded from the rows:\n%s", adds[0].Stats, folded.JSON())
	}
}
