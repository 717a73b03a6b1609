package keyed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The batch form of these tests: a key, a value and the row's order in the batch.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ord", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// testRecord is rows (id, v) numbered from ord.
func testRecord(ord int64, rows ...[2]any) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r[0].(string))
		b.Field(1).(*array.Int64Builder).Append(int64(r[1].(int)))
		b.Field(2).(*array.Int64Builder).Append(ord + int64(i))
	}
	return b.NewRecordBatch()
}

// rowsOf renders a record's rows as id=v@ord.
func rowsOf(rec arrow.RecordBatch) []string {
	var out []string
	for i := range int(rec.NumRows()) {
		out = append(out, fmt.Sprintf("%s=%d@%d", rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.Int64).Value(i), rec.Column(2).(*array.Int64).Value(i)))
	}
	return out
}

// holder holds records while they fit: each row costs 100 bytes.
type holder struct {
	recs     []arrow.RecordBatch
	rows     int64
	released bool
}

func (h *holder) Add(_ context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	h.recs = append(h.recs, rec)
	h.rows += rec.NumRows()
	return nil
}
func (h *holder) Held() int64 { return h.rows * 100 }
func (h *holder) HandOver(ctx context.Context, b *Batch) error {
	for _, r := range h.recs {
		if err := b.Spill(ctx, r); err != nil {
			return err
		}
	}
	arrowx.ReleaseRecords(h.recs)
	h.recs, h.released = nil, true
	return nil
}

func TestKeyEncodingNormalisesValues(t *testing.T) {
	mem := memory.DefaultAllocator
	i32, i64, s := array.NewInt32Builder(mem), array.NewInt64Builder(mem), array.NewStringBuilder(mem)
	i32.AppendValues([]int32{7, 0}, []bool{true, false})
	i64.AppendValues([]int64{7, 0}, []bool{true, false})
	s.AppendValues([]string{"a", "b"}, nil)
	sch := func(t arrow.DataType) *arrow.Schema {
		return arrow.NewSchema([]arrow.Field{{Name: "k", Type: t, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	}
	strs := s.NewArray()
	a := array.NewRecordBatch(sch(arrow.PrimitiveTypes.Int32), []arrow.Array{i32.NewArray(), strs}, 2)
	b := array.NewRecordBatch(sch(arrow.PrimitiveTypes.Int64), []arrow.Array{i64.NewArray(), strs}, 2)
	for i := range 2 {
		ka, err := AppendKey(nil, a, []int{0, 1}, i)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := AppendKey(nil, b, []int{0, 1}, i)
		if err != nil {
			t.Fatal(err)
		}
		if string(ka) != string(kb) {
			t.Errorf("row %d: an int32 key encodes as %x, the same int64 key as %x", i, ka, kb)
		}
		row := []any{nil, strs.(*array.String).Value(i)}
		if i == 0 {
			row[0] = int64(7)
		}
		if kr := AppendRowKey(nil, row, []int{0, 1}); string(kr) != string(kb) {
			t.Errorf("row %d: the Go row encodes as %x, the Arrow row as %x", i, kr, kb)
		}
	}
	if lo, hi := HashBounds(0, Ranges); lo >= hi {
		t.Errorf("the bounds of every range are [%d, %d]", lo, hi)
	}
	for _, k := range []string{"a", "b", "C000001"} {
		lo, hi := HashBounds(int(Range([]byte(k))), int(Range([]byte(k)))+1)
		if h := Hash([]byte(k)); h < lo || h > hi {
			t.Errorf("key %s: hash %d outside its range's bounds [%d, %d]", k, h, lo, hi)
		}
	}
}

// KeyArray holds each row's key of a block as it was appended, a row without a key as
// null, whatever the block held before a Reset.
func TestKeyArray(t *testing.T) {
	var b keyindex.Block
	b.Buf = append(b.Buf, "left over"...)
	b.Reset()
	want := []any{"k1", nil, "", "key-two", nil}
	for _, k := range want {
		if k == nil {
			b.Skip()
			continue
		}
		b.Buf = append(b.Buf, k.(string)...)
		b.End()
	}
	a := KeyArray(&b).(*array.Binary)
	defer a.Release()
	if a.Len() != len(want) || a.NullN() != 2 {
		t.Fatalf("%d rows, %d nulls; want %d rows, 2 nulls", a.Len(), a.NullN(), len(want))
	}
	for i, k := range want {
		switch {
		case k == nil && a.IsValid(i):
			t.Errorf("row %d: %q, want null", i, a.Value(i))
		case k != nil && (a.IsNull(i) || string(a.Value(i)) != k.(string)):
			t.Errorf("row %d: %q (null %v), want %q", i, a.Value(i), a.IsNull(i), k)
		}
	}
	b.Reset()
	b.Buf = append(b.Buf, "x"...)
	b.End()
	one := KeyArray(&b).(*array.Binary)
	defer one.Release()
	if one.NullN() != 0 || one.NullBitmapBytes() != nil || string(one.Value(0)) != "x" {
		t.Errorf("a block whose rows all have keys: %v, %d nulls", one, one.NullN())
	}
}

// A batch goes to its live pass while it fits; the record that makes it hold too much
// has the live pass hand everything over, and every record after goes to the ranges of
// its rows' keys: each row once, each range in the order the rows came, a filter of the
// keys for the target.
func TestBatchHandsOverAndCarriesOn(t *testing.T) {
	ctx := context.Background()
	r := &Run{Limit: 1000, SpillDir: t.TempDir()} // 10 rows
	defer r.Close()
	h := &holder{}
	b := r.NewBatch(h, BatchOptions{Keys: []int{0}})
	var want []string
	ord := int64(0)
	for rec := range 5 {
		var rows [][2]any
		for i := range 4 {
			rows = append(rows, [2]any{fmt.Sprintf("K%d", (rec*4+i)%13), rec*10 + i})
		}
		x := testRecord(ord, rows...)
		ord += x.NumRows()
		want = append(want, rowsOf(x)...)
		if err := b.Add(ctx, x); err != nil {
			t.Fatal(err)
		}
		x.Release()
		if spilled := rec >= 2; b.Spilled() != spilled {
			t.Fatalf("after record %d (%d rows held at most 10): spilled %v, want %v", rec, (rec+1)*4, b.Spilled(), spilled)
		}
	}
	if !h.released {
		t.Fatal("the live pass did not let go of its records")
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	var got []string
	n, err := b.Passes(ctx, 0, nil, func(bb, br, _, _ int64) int64 { return br * 100 }, func(ctx context.Context, p *Pass) error {
		if p.Live != nil {
			t.Fatal("a live pass of a batch handed over")
		}
		var last int64 = -1
		return p.EachBatch(ctx, func(_ context.Context, rec arrow.RecordBatch) error {
			for i := range int(rec.NumRows()) {
				key := []byte{1, 2}
				key = append(key[:1], byte(len(rec.Column(0).(*array.String).Value(i))))
				key = append(key, rec.Column(0).(*array.String).Value(i)...)
				if rg := int(Range(key)); rg < p.Lo || rg >= p.Hi {
					t.Errorf("row of key %s (range %d) in a pass of ranges [%d, %d)", rec.Column(0).(*array.String).Value(i), rg, p.Lo, p.Hi)
				}
				if !b.Filter(0).MayHave(key) {
					t.Errorf("the filter lacks key %s", key)
				}
				o := rec.Column(2).(*array.Int64).Value(i)
				if Range(key) == uint16(p.Lo) && o < last {
					t.Errorf("range %d: row %d after row %d", p.Lo, o, last)
				}
				last = o
			}
			got = append(got, rowsOf(rec)...)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Errorf("%d passes for 20 rows of 10 a pass", n)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rows read back:\n%v\nwant\n%v", got, want)
	}
}

// A batch that fits is one live pass over every range, and nothing is written to disk.
func TestBatchThatFitsIsOneLivePass(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := &Run{Limit: 1 << 20, SpillDir: dir}
	defer r.Close()
	h := &holder{}
	b := r.NewBatch(h, BatchOptions{Keys: []int{0}})
	x := testRecord(0, [2]any{"a", 1}, [2]any{"b", 2})
	defer x.Release()
	if err := b.Add(ctx, x); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	var passes []string
	n, err := b.Passes(ctx, 0, nil, nil, func(ctx context.Context, p *Pass) error {
		passes = append(passes, fmt.Sprintf("[%d,%d) live=%v", p.Lo, p.Hi, p.Live == h))
		return p.EachBatch(ctx, func(context.Context, arrow.RecordBatch) error { t.Error("a live pass read records back"); return nil })
	})
	if err != nil || n != 1 || !slices.Equal(passes, []string{"[0,256) live=true"}) {
		t.Errorf("passes %v (%d, %v), want one live pass over every range", passes, n, err)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("a batch in memory made %v", left)
	}
}

// Plan groups consecutive ranges within the limit; a range over it is a pass alone.
func TestPlan(t *testing.T) {
	costs := map[int]int64{0: 5, 1: 5, 2: 20, 3: 1, 255: 3}
	got := Plan(func(p int) int64 { return costs[p] }, 10)
	want := [][2]int{{0, 2}, {2, 3}, {3, Ranges}}
	if !slices.Equal(got, want) {
		t.Errorf("Plan = %v, want %v", got, want)
	}
}

// groups: each group's rows are set aside in its own ranges.
func TestBatchGroups(t *testing.T) {
	ctx := context.Background()
	r := &Run{Limit: 100, SpillDir: t.TempDir()}
	defer r.Close()
	b := r.NewBatch(&holder{}, BatchOptions{Keys: []int{0}, Groups: 3, Group: func(rec arrow.RecordBatch) int {
		return int(rec.Column(1).(*array.Int64).Value(0) / 100)
	}})
	for g := range 3 {
		if g == 1 {
			continue // a group without rows
		}
		x := testRecord(int64(g*10), [2]any{"a", g * 100}, [2]any{"b", g*100 + 1})
		if err := b.Add(ctx, x); err != nil {
			t.Fatal(err)
		}
		x.Release()
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	for g, want := range [][]string{{"a=0@0", "b=1@1"}, nil, {"a=200@20", "b=201@21"}} {
		var got []string
		if _, err := b.Passes(ctx, g, nil, func(_, br, _, _ int64) int64 { return br }, func(ctx context.Context, p *Pass) error {
			return p.EachBatch(ctx, func(_ context.Context, rec arrow.RecordBatch) error { got = append(got, rowsOf(rec)...); return nil })
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("group %d: %v, want %v", g, got, want)
		}
	}
}

// testTable is a table (id string, v long, sk long identity) of files, each a list of
// (id, v).
func testTable(t *testing.T, props map[string]string, files ...[][2]any) (*delta.Table, *delta.Snapshot) {
	t.Helper()
	ctx := context.Background()
	sk := &delta.StructField{Name: "sk", Type: &delta.PrimitiveType{Name: delta.TypeLong}}
	delta.SetIdentity(sk, 1, 1, true)
	schema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
		{Name: "v", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true},
		sk,
	}}
	tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "t", delta.CreateOptions{Schema: schema, Properties: props}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	as, err := delta.ArrowSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	sks := int64(0)
	for _, rows := range files {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w, err := snap.NewDataWriter(delta.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		for _, r := range rows {
			sks++
			b.Field(0).(*array.StringBuilder).Append(r[0].(string))
			b.Field(1).(*array.Int64Builder).Append(int64(r[1].(int)))
			b.Field(2).(*array.Int64Builder).Append(sks)
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		adds, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, snap
}

// targetRows renders a target side's rows of ranges [lo, hi) with their places, as
// id=v@file:row (and the extra columns' values).
func targetRows(t *testing.T, tg *Target, lo, hi int) []string {
	t.Helper()
	var out []string
	err := tg.Each(context.Background(), lo, hi, func(tr TargetRecord) error {
		for i := range int(tr.Rec.NumRows()) {
			s := ""
			if tr.Rec.NumCols() > 0 {
				s = fmt.Sprintf("%s=%d", tr.Rec.Column(0).(*array.String).Value(i), tr.Rec.Column(1).(*array.Int64).Value(i))
			}
			for _, e := range tr.Extra {
				s += " " + e.ValueStr(i)
			}
			p := tr.Place(i)
			out = append(out, fmt.Sprintf("%s@%d:%d", s, p.File, p.Row))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func selectID(rec arrow.RecordBatch) ([]int, func(int) bool, error) { return []int{0}, nil, nil }

// The target spiller sets aside, once, the rows of the keys the batch may have (and
// those KeepAll asks for), each with its place: a pass reads back what the live scan
// gives of its keys, at the same places.
func TestTargetSpill(t *testing.T) {
	ctx := context.Background()
	_, snap := testTable(t, nil, [][2]any{{"a", 1}, {"b", 2}, {"c", 3}}, [][2]any{{"d", 4}, {"e", 5}})
	live := targetRows(t, NewTarget(snap, TargetSpec{Select: selectID}), 0, Ranges)
	if len(live) != 5 {
		t.Fatalf("live scan: %v", live)
	}
	filter := NewFilter(1 << 20)
	for _, k := range []string{"b", "e", "zz"} {
		filter.Add(append([]byte{1, 1}, k...))
	}
	dir, err := NewDir(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Remove()
	tg := NewTarget(snap, TargetSpec{Select: func(rec arrow.RecordBatch) ([]int, func(int) bool, error) {
		return []int{0}, func(i int) bool { return rec.Column(1).(*array.Int64).Value(i) == 3 }, nil // and v = 3 whatever the keys
	}})
	if err := tg.Spill(ctx, dir, 1<<20, filter); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range Plan(func(int) int64 { return 1 }, 100) {
		got = append(got, targetRows(t, tg, r[0], r[1])...)
	}
	slices.Sort(got)
	want := slices.DeleteFunc(slices.Clone(live), func(s string) bool {
		return !strings.HasPrefix(s, "b=") && !strings.HasPrefix(s, "e=") && !strings.HasPrefix(s, "c=")
	})
	if !slices.Equal(got, want) {
		t.Errorf("set aside %v, want %v (the live scan's rows of b, e and c)", got, want)
	}
	// Every row, only extra columns kept: the same places.
	all := NewTarget(snap, TargetSpec{Select: selectID, All: true, KeepNone: true,
		ExtraFields: []arrow.Field{{Name: "twice", Type: arrow.PrimitiveTypes.Int64}},
		Extra: func(_ context.Context, rec arrow.RecordBatch, keep []int32) ([]arrow.Array, error) {
			v := make([]int64, len(keep))
			for i, k := range keep {
				v[i] = 2 * rec.Column(1).(*array.Int64).Value(int(k))
			}
			return []arrow.Array{Int64s(v)}, nil
		}})
	if err := all.Spill(ctx, dir, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	got = targetRows(t, all, 0, Ranges)
	want = nil
	for _, r := range live { // id=v@place: " 2v@place"
		var id string
		var v int
		var place string
		fmt.Sscanf(strings.Replace(strings.Replace(r, "=", " ", 1), "@", " ", 1), "%s %d %s", &id, &v, &place)
		want = append(want, fmt.Sprintf(" %d@%s", 2*v, place))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("all rows, extra only: %v, want %v", got, want)
	}
}

// A filter has every key added (tested one at a time or a record's at once), turns
// away most keys it was not given, and a nil filter may have every key.
func TestFilter(t *testing.T) {
	f := NewFilter(1 << 20)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
	var hs []uint64
	for i := range 1000 {
		if i%2 == 0 {
			f.Add(key(i))
		} else {
			hs = append(hs, uint64(Hash(key(i))))
		}
	}
	f.addHashes(hs)
	var all []uint64
	for i := range 11000 {
		all = append(all, uint64(Hash(key(i))))
	}
	may := f.mayHaveHashes(all, nil)
	others := 0
	for i, m := range may {
		if m != f.MayHave(key(i)) {
			t.Fatalf("key %d: %v tested with the record's keys, %v alone", i, m, !m)
		}
		if i < 1000 && !m {
			t.Fatalf("the filter lacks key %d", i)
		}
		if i >= 1000 && m {
			others++
		}
	}
	if others > 500 {
		t.Errorf("%d of 10000 keys not added pass the filter, want under 5%%", others)
	}
	if may := Filter(nil).mayHaveHashes(all[:3], nil); len(may) != 3 || !may[0] || !may[1] || !may[2] || !Filter(nil).MayHave(key(1)) {
		t.Errorf("a nil filter: %v, want every key", may)
	}
}

// A batch whose passes may run two at once plans them at half the budget and runs two
// at a time: every range in exactly one pass, every row read back once; a pass that
// fails fails the run with its error, and no pass starts after it.
func TestPassesTwoAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	ctx := context.Background()
	spilled := func(t *testing.T) (*Run, *Batch, []string) {
		r := &Run{Limit: 2000, SpillDir: t.TempDir()} // 20 rows a pass, 10 two at once
		b := r.NewBatch(&holder{}, BatchOptions{Keys: []int{0}, TwoAtOnce: true})
		if err := b.HandOver(ctx); err != nil {
			t.Fatal(err)
		}
		var rows [][2]any
		for i := range 200 {
			rows = append(rows, [2]any{fmt.Sprintf("K%d", i), i})
		}
		x := testRecord(0, rows...)
		defer x.Release()
		if err := b.Add(ctx, x); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		return r, b, rowsOf(x)
	}
	r, b, want := spilled(t)
	defer r.Close()
	cost := func(bb, br, _, _ int64) int64 { return br * 100 }
	var mu sync.Mutex
	var got []string
	covered := make([]int, Ranges)
	running, most := 0, 0
	n, err := b.Passes(ctx, 0, nil, cost, func(ctx context.Context, p *Pass) error {
		mu.Lock()
		running++
		most = max(most, running)
		for rg := p.Lo; rg < p.Hi; rg++ {
			covered[rg]++
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // (long enough for the other pass to start)
		err := p.EachBatch(ctx, func(_ context.Context, rec arrow.RecordBatch) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, rowsOf(rec)...)
			return nil
		})
		mu.Lock()
		running--
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if wantN := len(Plan(func(p int) int64 { return b.groups[0].out.PartRows(p) * 100 }, r.Limit/2)); n != wantN || n < 10 {
		t.Errorf("%d passes, want %d (planned at half the budget: 10 rows each)", n, wantN)
	}
	if most != 2 {
		t.Errorf("at most %d passes ran at once, want 2", most)
	}
	for rg, c := range covered {
		if c != 1 {
			t.Fatalf("range %d in %d passes", rg, c)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rows read back: %d, want %d", len(got), len(want))
	}

	r2, b2, _ := spilled(t)
	defer r2.Close()
	boom := errors.New("boom")
	started := 0
	_, err = b2.Passes(ctx, 0, nil, cost, func(ctx context.Context, p *Pass) error {
		mu.Lock()
		started++
		mu.Unlock()
		if p.N == 3 {
			return boom
		}
		time.Sleep(20 * time.Millisecond) // (the failure comes while the pass beside it works)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("pass 3 failing: Passes returned %v, want its error", err)
	}
	if started > 4 {
		t.Errorf("%d passes started, want none after the one that failed and the one beside it", started)
	}
}
