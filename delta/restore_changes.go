package delta

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/zeebo/xxh3"
)

// The change data of a RESTORE. Spark's RESTORE writes none, so its change feed is
// file-level: every row of a removed file is a delete and every row of a file brought
// back an insert, although most of those rows are the same on both sides (a MERGE that
// rewrote a file to change one row is undone by removing the new file and adding the
// old one back: all of its other rows appear deleted and inserted again). A reader of
// the feed that keeps history (capture_history) would then record changes that never
// happened.
//
// Restore writes _change_data files with the net difference instead: the rows of the
// files it removes and of the files it brings back are compared as multisets of whole
// rows (in the restored version's schema); a row on both sides is no change. What is
// left over is a delete (only among the removed rows) or an insert (only among the
// rows brought back), and with RestoreOptions.Keys a delete and an insert of the same
// key are an update_preimage and update_postimage pair. When nothing is left over (the
// files differ but not the rows: a rewrite), the commit's adds and removes carry
// dataChange=false, as an OPTIMIZE's do, and its change feed is empty.
//
// Cost: the removed and restored files are read twice, and the first pass keeps a
// 16-byte hash and a count per distinct row of the removed files (rows found again
// among the restored ones are dropped from it as they are); the rows that changed are
// held in memory to pair them by key before they are written.

// restoreChangeCounts counts the rows of a RESTORE's change data by kind.
type restoreChangeCounts struct {
	deleted, inserted, updated int64
}

// rowHash is the hash of a row's encoding (xxh3, 128 bits: a collision among the rows of
// a restore is not a concern).
type rowHash = xxh3.Uint128

// restoreChanges computes the net change data of a restore from latest to target,
// which removes the files remove and brings back the files restore. ok is false when
// the change data cannot be computed row by row (the partition columns changed between
// the two versions): the restore then leaves the change feed to its files.
func (t *Table) restoreChanges(ctx context.Context, target *Snapshot, latest *Snapshot, restore, remove []*Add, keys []string) (recs []arrow.RecordBatch, n restoreChangeCounts, ok bool, err error) {
	if !slices.Equal(lowerAll(latest.PartitionColumns()), lowerAll(target.PartitionColumns())) {
		return nil, n, false, nil
	}
	schema := target.Schema()
	for _, k := range keys {
		if schema.Field(k) == nil {
			return nil, n, false, fmt.Errorf("restore: key column %s is not in the schema of version %d", k, target.version)
		}
	}
	scan := func(files []*Add, fn func(rec arrow.RecordBatch, hashes []rowHash) error) error {
		if len(files) == 0 {
			return nil
		}
		sc, err := Scan(ctx, t.store, t.root, schema, target.PartitionColumns(), files, ScanOptions{})
		if err != nil {
			return err
		}
		defer sc.Release()
		var buf []byte
		var hashes []rowHash
		for sc.Next() {
			rec := sc.RecordBatch()
			enc, err := newRowEncoder(rec, nil)
			if err != nil {
				return err
			}
			hashes = hashes[:0]
			for i := range int(rec.NumRows()) {
				buf = enc.encode(buf[:0], i)
				hashes = append(hashes, xxh3.Hash128(buf))
			}
			if err := fn(rec, hashes); err != nil {
				return err
			}
		}
		return sc.Err()
	}

	// Pass 1: the net count of each row: + for each copy among the removed rows, − for
	// each among the rows brought back. Rows that cancel leave the map at once.
	net := map[rowHash]int64{}
	if err := scan(remove, func(_ arrow.RecordBatch, hs []rowHash) error {
		for _, h := range hs {
			net[h]++
		}
		return nil
	}); err != nil {
		return nil, n, false, fmt.Errorf("read the files the restore removes: %w", err)
	}
	if err := scan(restore, func(_ arrow.RecordBatch, hs []rowHash) error {
		for _, h := range hs {
			if c := net[h] - 1; c == 0 {
				delete(net, h)
			} else {
				net[h] = c
			}
		}
		return nil
	}); err != nil {
		return nil, n, false, fmt.Errorf("read the files the restore brings back: %w", err)
	}
	if len(net) == 0 {
		return nil, n, true, nil
	}

	// Pass 2: take the rows left over, each as many times as its count says.
	take := func(files []*Add, leaving bool) ([]arrow.RecordBatch, error) {
		var out []arrow.RecordBatch
		err := scan(files, func(rec arrow.RecordBatch, hs []rowHash) error {
			var rows []int32
			for i, h := range hs {
				c := net[h]
				switch {
				case leaving && c > 0:
					net[h] = c - 1
				case !leaving && c < 0:
					net[h] = c + 1
				default:
					continue
				}
				rows = append(rows, int32(i))
			}
			if len(rows) == 0 {
				return nil
			}
			r, err := arrowx.Take(ctx, memory.DefaultAllocator, rec, rows)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, err
		}
		return out, nil
	}
	gone, err := take(remove, true)
	if err != nil {
		return nil, n, false, fmt.Errorf("read the files the restore removes: %w", err)
	}
	defer arrowx.ReleaseRecords(gone)
	back, err := take(restore, false)
	if err != nil {
		return nil, n, false, fmt.Errorf("read the files the restore brings back: %w", err)
	}
	defer arrowx.ReleaseRecords(back)

	goneTypes, backTypes, err := pairByKey(gone, back, keys)
	if err != nil {
		return nil, n, false, err
	}
	for i, r := range gone {
		c, err := withChangeType(r, goneTypes[i])
		if err != nil {
			arrowx.ReleaseRecords(recs)
			return nil, n, false, err
		}
		recs = append(recs, c)
	}
	for i, r := range back {
		c, err := withChangeType(r, backTypes[i])
		if err != nil {
			arrowx.ReleaseRecords(recs)
			return nil, n, false, err
		}
		recs = append(recs, c)
	}
	for _, ts := range [][][]string{goneTypes, backTypes} {
		for _, types := range ts {
			for _, ct := range types {
				switch ct {
				case ChangeDelete:
					n.deleted++
				case ChangeInsert:
					n.inserted++
				case ChangeUpdatePostimage:
					n.updated++
				}
			}
		}
	}
	return recs, n, true, nil
}

// pairByKey gives each row that left (gone) and came back (back) its change type: a
// delete or an insert, or, when a row that left and one that came back have the same
// key (keys set), an update_preimage and update_postimage. Rows pair in order when a
// key repeats.
func pairByKey(gone, back []arrow.RecordBatch, keys []string) (goneTypes, backTypes [][]string, err error) {
	fill := func(recs []arrow.RecordBatch, ct string) [][]string {
		out := make([][]string, len(recs))
		for i, r := range recs {
			out[i] = make([]string, r.NumRows())
			for j := range out[i] {
				out[i][j] = ct
			}
		}
		return out
	}
	goneTypes, backTypes = fill(gone, ChangeDelete), fill(back, ChangeInsert)
	if len(keys) == 0 || len(gone) == 0 || len(back) == 0 {
		return goneTypes, backTypes, nil
	}
	encode := func(rec arrow.RecordBatch) (*rowEncoder, error) {
		cols := make([]int, len(keys))
		for i, k := range keys {
			cols[i] = fieldIndex(rec.Schema(), k)
		}
		return newRowEncoder(rec, cols)
	}
	type at struct{ rec, row int }
	waiting := map[string][]at{} // key → rows that left with it, not paired yet
	var buf []byte
	for ri, r := range gone {
		enc, err := encode(r)
		if err != nil {
			return nil, nil, fmt.Errorf("restore: key columns: %w", err)
		}
		for j := range int(r.NumRows()) {
			buf = enc.encode(buf[:0], j)
			waiting[string(buf)] = append(waiting[string(buf)], at{ri, j})
		}
	}
	for ri, r := range back {
		enc, err := encode(r)
		if err != nil {
			return nil, nil, fmt.Errorf("restore: key columns: %w", err)
		}
		for j := range int(r.NumRows()) {
			buf = enc.encode(buf[:0], j)
			w := waiting[string(buf)]
			if len(w) == 0 {
				continue
			}
			goneTypes[w[0].rec][w[0].row] = ChangeUpdatePreimage
			backTypes[ri][j] = ChangeUpdatePostimage
			waiting[string(buf)] = w[1:]
		}
	}
	return goneTypes, backTypes, nil
}

// withChangeType returns rec with a _change_type column holding types.
func withChangeType(rec arrow.RecordBatch, types []string) (arrow.RecordBatch, error) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(types, nil)
	ct := b.NewArray()
	defer ct.Release()
	fields := append(slices.Clone(rec.Schema().Fields()), arrow.Field{Name: ChangeTypeColumn, Type: arrow.BinaryTypes.String})
	cols := append(slices.Clone(rec.Columns()), ct)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

func lowerAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}
