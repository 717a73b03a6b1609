package delta_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func identitySchema(allowExplicit bool) *delta.StructType {
	return &delta.StructType{Fields: []*delta.StructField{
		{Name: "sk", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: false, Metadata: map[string]any{
			delta.IdentityStart: json.Number("100"), delta.IdentityStep: json.Number("10"), delta.IdentityAllowExplicitInsert: allowExplicit}},
		{Name: "name", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
	}}
}

func identityTable(t testing.TB, st objectstore.Store, allowExplicit bool) *delta.Table {
	t.Helper()
	tbl, err := delta.Create(context.Background(), st, "wh/dim", delta.CreateOptions{Schema: identitySchema(allowExplicit),
		Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// namesRecord has only the name column (sk is generated), or sk too when sks is set.
func namesRecord(names []string, sks []int64) arrow.RecordBatch {
	fields := []arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}
	if sks != nil {
		fields = append(fields, arrow.Field{Name: "sk", Type: arrow.PrimitiveTypes.Int64})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, n := range names {
		b.Field(0).(*array.StringBuilder).Append(n)
		if sks != nil {
			b.Field(1).(*array.Int64Builder).Append(sks[i])
		}
	}
	return b.NewRecordBatch()
}

// identityRows returns sk -> name of the latest snapshot.
func identityRows(t testing.TB, tbl *delta.Table) map[int64]string {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	out := map[int64]string{}
	n := 0
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			out[rec.Column(0).(*array.Int64).Value(i)] = rec.Column(1).(*array.String).Value(i)
			n++
		}
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	if n != len(out) {
		t.Fatalf("%d rows but %d distinct sk values", n, len(out))
	}
	return out
}

func highWaterMark(t testing.TB, snap *delta.Snapshot) int64 {
	t.Helper()
	cols, err := snap.IdentityColumns()
	if err != nil || len(cols) != 1 || cols[0].HighWaterMark == nil {
		t.Fatalf("identity columns %+v %v", cols, err)
	}
	return *cols[0].HighWaterMark
}

func commitJSON(t testing.TB, tbl *delta.Table, v int64) string {
	t.Helper()
	rc, err := tbl.Store().Get(context.Background(), tbl.Key(fmt.Sprintf("_delta_log/%020d.json", v)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

func TestIdentityConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	tbl := identityTable(t, mem.New(mem.Config{}), false)
	snap, _ := tbl.Snapshot(ctx)
	if p := snap.Protocol(); p.MinWriterVersion != 7 || !strings.Contains(strings.Join(p.WriterFeatures, ","), delta.FeatureIdentityColumns) {
		t.Fatalf("protocol %+v lacks identityColumns", p)
	}
	const writers, rows = 8, 25
	var wg sync.WaitGroup
	errs := make([]error, writers)
	versions := make([]int64, writers)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names := make([]string, rows)
			for i := range names {
				names[i] = fmt.Sprintf("w%d-%d", g, i)
			}
			rec := namesRecord(names, nil)
			defer rec.Release()
			versions[g], errs[g] = tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}})
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", g, err)
		}
	}
	got := identityRows(t, tbl)
	if len(got) != writers*rows {
		t.Fatalf("%d rows, want %d", len(got), writers*rows)
	}
	var maxSK int64
	for sk := range got {
		if sk < 100 || (sk-100)%10 != 0 {
			t.Errorf("sk %d is not 100 + k*10", sk)
		}
		maxSK = max(maxSK, sk)
	}
	snap, _ = tbl.Snapshot(ctx)
	if hw := highWaterMark(t, snap); hw != maxSK || maxSK != 100+10*(writers*rows-1) {
		t.Errorf("high-water mark %d, max sk %d", hw, maxSK)
	}
	// Each data commit carries its own high-water mark in a metaData action.
	for _, v := range versions {
		if c := commitJSON(t, tbl, v); !strings.Contains(c, `"metaData"`) || !strings.Contains(c, "delta.identity.highWaterMark") {
			t.Errorf("version %d lacks the high-water mark metaData: %s", v, c)
		}
	}
}

func TestIdentityExplicitValues(t *testing.T) {
	ctx := context.Background()
	tbl := identityTable(t, mem.New(mem.Config{}), false)
	rec := namesRecord([]string{"x"}, []int64{5})
	defer rec.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err == nil || !strings.Contains(err.Error(), "GENERATED ALWAYS") {
		t.Fatalf("explicit value accepted: %v", err)
	}
	// Values the transaction allocated itself are accepted (the SCD2 pattern).
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	first, step, err := tx.AllocateIdentity("sk", 2)
	if err != nil || first != 100 || step != 10 {
		t.Fatalf("allocate: %d %d %v", first, step, err)
	}
	src := namesRecord([]string{"a", "b"}, []int64{first, first + step})
	defer src.Release()
	res, err := tbl.Merge(ctx, delta.MergeOptions{Tx: tx, Source: []arrow.RecordBatch{src}, On: []string{"sk"},
		WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate}}, WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := identityRows(t, tbl); len(got) != 2 || got[100] != "a" || got[110] != "b" {
		t.Errorf("rows %v", got)
	}
	snap, _ = tbl.Snapshot(ctx)
	if hw := highWaterMark(t, snap); hw != 110 {
		t.Errorf("high-water mark %d, want 110", hw)
	}
	if !strings.Contains(commitJSON(t, tbl, res.Version), "delta.identity.highWaterMark") {
		t.Error("merge commit lacks the high-water mark")
	}
	// A merge insert without sk generates values after the mark.
	src2 := namesRecord([]string{"c"}, nil)
	defer src2.Release()
	if _, err := tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{src2}, On: []string{"name"},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}}); err != nil {
		t.Fatal(err)
	}
	if got := identityRows(t, tbl); got[120] != "c" {
		t.Errorf("rows %v", got)
	}
	// With allowExplicitInsert, explicit values are kept.
	tbl2 := identityTable(t, mem.New(mem.Config{}), true)
	if _, err := tbl2.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
		t.Fatal(err)
	}
	if got := identityRows(t, tbl2); got[5] != "x" {
		t.Errorf("rows %v", got)
	}
}

// A concurrent identity insert changes only the high-water mark: a transaction that
// changed no metadata commits over it; one that allocated values conflicts.
func TestIdentityHighWaterMarkConflicts(t *testing.T) {
	ctx := context.Background()
	tbl := identityTable(t, mem.New(mem.Config{}), false)
	snap, _ := tbl.Snapshot(ctx)
	plain := tbl.NewTransaction(snap, delta.TxOptions{})
	plain.SetTxn("progress", 1)
	allocating := tbl.NewTransaction(snap, delta.TxOptions{})
	if _, _, err := allocating.AllocateIdentity("sk", 1); err != nil {
		t.Fatal(err)
	}
	rec := namesRecord([]string{"x"}, nil)
	defer rec.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Commit(ctx); err != nil {
		t.Errorf("transaction without metadata: %v", err)
	}
	var ce *delta.ConflictError
	if _, err := allocating.Commit(ctx); !errors.As(err, &ce) || ce.Kind != delta.ConflictMetadataChanged {
		t.Errorf("allocating transaction: err = %v, want MetadataChanged", err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if hw := highWaterMark(t, snap); hw != 100 {
		t.Errorf("high-water mark %d, want 100", hw)
	}
}
