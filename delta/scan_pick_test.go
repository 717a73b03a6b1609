package delta_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
)

// checkPickedScan checks that a scan whose Pick keeps rows in two steps (by id, then by
// name, or both at once) returns what a whole scan returns kept by the same rules, with
// each row's place in its file equal to the whole scan's Position: on a table of the DML
// property (deletion vectors, column mapping, a partition column), batches of any size,
// read ahead or not.
func checkPickedScan(t *testing.T, tbl *delta.Table, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, rest, parity := int64(rng.IntN(3)+1), int64(rng.IntN(3)), rng.IntN(3)
	byID := func(id int64) bool { return id%mod != rest }
	byName := func(name string, null bool) bool {
		return parity == 2 || !null && name != "" && int(name[len(name)-1])%2 == parity
	}
	batch := int64(rng.IntN(9) + 1)
	ahead := rng.IntN(2) == 0
	var want []string
	scan(t, snap, delta.ScanOptions{FilesOnly: true, BatchSize: batch, ReadAhead: ahead}, func(sc *delta.Scanner, rec arrow.RecordBatch) {
		file, first, ok := sc.Position()
		if !ok {
			t.Fatal("no position in a whole scan")
		}
		ids, names, parts := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String), rec.Column(2).(*array.String)
		for r := range int(rec.NumRows()) {
			if byID(ids.Value(r)) && byName(names.Value(r), names.IsNull(r)) {
				want = append(want, fmt.Sprintf("%s@%d id=%d name=%s part=%s", file.Path, first+int64(r), ids.Value(r), names.Value(r), parts.Value(r)))
			}
		}
	})
	col := func(rec arrow.RecordBatch, name string) arrow.Array {
		i := rec.Schema().FieldIndices(name)
		if len(i) != 1 {
			t.Fatalf("step record without column %s: %v", name, rec.Schema())
		}
		return rec.Column(i[0])
	}
	keepIDs := func(rec arrow.RecordBatch) ([]int32, error) {
		var keep []int32
		ids := col(rec, "id").(*array.Int64)
		for r := range ids.Len() {
			if byID(ids.Value(r)) {
				keep = append(keep, int32(r))
			}
		}
		return keep, nil
	}
	keepNames := func(rec arrow.RecordBatch) ([]int32, error) {
		var keep []int32
		names := col(rec, "name").(*array.String)
		for r := range names.Len() {
			if byName(names.Value(r), names.IsNull(r)) {
				keep = append(keep, int32(r))
			}
		}
		return keep, nil
	}
	steps := []delta.PickStep{{Columns: []string{"id"}, Keep: keepIDs}, {Columns: []string{"name"}, Keep: keepNames}}
	switch rng.IntN(3) {
	case 1:
		steps[0], steps[1] = steps[1], steps[0]
	case 2:
		steps = []delta.PickStep{{Columns: []string{"name", "id"}, Keep: func(rec arrow.RecordBatch) ([]int32, error) {
			a, _ := keepIDs(rec)
			b, _ := keepNames(rec)
			var both []int32
			for _, r := range a {
				if _, ok := slices.BinarySearch(b, r); ok {
					both = append(both, r)
				}
			}
			return both, nil
		}}}
	}
	var got []string
	scan(t, snap, delta.ScanOptions{FilesOnly: true, BatchSize: batch, ReadAhead: ahead, Pick: steps}, func(sc *delta.Scanner, rec arrow.RecordBatch) {
		file, _, ok := sc.Position()
		rows := sc.Rows()
		if !ok || len(rows) != int(rec.NumRows()) {
			t.Fatalf("picked record of %d rows: position %v, %d row places", rec.NumRows(), ok, len(rows))
		}
		ids, names, parts := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String), rec.Column(2).(*array.String)
		for r := range int(rec.NumRows()) {
			got = append(got, fmt.Sprintf("%s@%d id=%d name=%s part=%s", file.Path, rows[r], ids.Value(r), names.Value(r), parts.Value(r)))
		}
	})
	if !slices.Equal(got, want) {
		t.Fatalf("picked scan (batch %d)\ngot  %v\nwant %v", batch, got, want)
	}
}

func scan(t *testing.T, snap *delta.Snapshot, opts delta.ScanOptions, each func(*delta.Scanner, arrow.RecordBatch)) {
	t.Helper()
	sc, err := snap.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	for sc.Next() {
		each(sc, sc.RecordBatch())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
