package delta_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

type dimRow struct {
	sk      int64
	id      int64
	name    string
	current bool
}

func dimRecord(rows []dimRow) arrow.RecordBatch {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "sk", Type: arrow.PrimitiveTypes.Int64},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "is_current", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.sk)
		b.Field(1).(*array.Int64Builder).Append(r.id)
		b.Field(2).(*array.StringBuilder).Append(r.name)
		b.Field(3).(*array.BooleanBuilder).Append(r.current)
	}
	return b.NewRecordBatch()
}

// scd2Apply is what the scd2_merge stage does in one commit: allocate surrogate keys for
// new versions, close the superseded rows by surrogate key and insert the new versions,
// with the batch's txn.
func scd2Apply(t *testing.T, tbl *delta.Table, closeSKs []dimRow, newVersions []dimRow, batch int64) *delta.MergeResult {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	first, step, err := tx.AllocateIdentity("sk", int64(len(newVersions)))
	if err != nil {
		t.Fatal(err)
	}
	rows := slices.Clone(closeSKs)
	for i, r := range newVersions {
		r.sk = first + int64(i)*step
		rows = append(rows, r)
	}
	src := dimRecord(rows)
	defer src.Release()
	res, err := tbl.Merge(ctx, delta.MergeOptions{
		Tx: tx, Source: []arrow.RecordBatch{src}, On: []string{"sk"},
		WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate, Set: map[string]any{"is_current": expr.Col("source.is_current")}}},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
		Txn:            &delta.Txn{AppID: "scd2:dim", Version: batch},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The SCD2 pattern in one commit: the change feed shows the closed row's pre/post images
// and the new version's insert; the high-water mark and the txn are in the same commit.
func TestMergeSCD2Pattern(t *testing.T) {
	ctx := context.Background()
	schema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "sk", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Metadata: map[string]any{
			delta.IdentityStart: json.Number("1"), delta.IdentityStep: json.Number("1"), delta.IdentityAllowExplicitInsert: false}},
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}},
		{Name: "name", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
		{Name: "is_current", Type: &delta.PrimitiveType{Name: delta.TypeBoolean}},
	}}
	tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "wh/dim", delta.CreateOptions{Schema: schema,
		Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	scd2Apply(t, tbl, nil, []dimRow{{id: 1, name: "a", current: true}, {id: 2, name: "b", current: true}}, 1)
	res := scd2Apply(t, tbl, []dimRow{{sk: 1, id: 1, name: "a", current: false}}, []dimRow{{id: 1, name: "a2", current: true}}, 2)
	if res.NumTargetRowsUpdated != 1 || res.NumTargetRowsInserted != 1 || res.NumTargetRowsCopied != 1 {
		t.Errorf("result %+v", res)
	}
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(res.Version), EndVersion: ptr(res.Version)})
	if err != nil {
		t.Fatal(err)
	}
	got := changeRows(t, r, []string{"sk", "id", "name", "is_current", "_change_type"})
	want := []string{
		"sk=1 id=1 name=a is_current=false _change_type=update_postimage",
		"sk=1 id=1 name=a is_current=true _change_type=update_preimage",
		"sk=3 id=1 name=a2 is_current=true _change_type=insert",
	}
	if !slices.Equal(got, want) {
		t.Errorf("feed:\ngot  %v\nwant %v", got, want)
	}
	c := commitJSON(t, tbl, res.Version)
	if !strings.Contains(c, `\"delta.identity.highWaterMark\":3`) || !strings.Contains(c, `"txn":{"appId":"scd2:dim","version":2`) {
		t.Errorf("commit lacks the high-water mark or the txn:\n%s", c)
	}
	snap, _ := tbl.Snapshot(ctx)
	if v, _ := snap.TxnVersion("scd2:dim"); v != 2 {
		t.Errorf("txn version %d", v)
	}
}
