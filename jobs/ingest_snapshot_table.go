package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Pass 1 of snapshot mode (ingest_snapshot.go): the table's keys, each with the hash of
// its other data columns and its row's place. In memory it is read by the live scan of
// the target (while pass 2 starts decoding); over the budget its rows are set aside by
// key hash range as (key, hash, place) and a pass reads back those of its ranges.

// snapTable is pass 1: the table's keys, with per key id its hash and place, and what
// pass 2 decided for it.
type snapTable struct {
	index *keyindex.Index
	hash  []dataHash
	file  []int32 // per key: its row's file (an index into the snapshot's files) ...
	row   []int64 // ... and index there
	// extra are the rows of keys the table holds twice (another writer's doing): they
	// are deleted. extraID is each one's key id.
	extra    []keyed.Place
	extraID  []int32
	side     snapSide
	keyBytes int64 // the keys' bytes in the index
}

// place is where key id's row is.
func (t *snapTable) place(id int) keyed.Place { return keyed.Place{File: t.file[id], Row: t.row[id]} }

// add indexes the keys of a block (with their hashes lo, hi) at their places.
func (t *snapTable) add(block *keyindex.Block, lo, hi []uint64, at func(i int) keyed.Place) {
	t.index.AddBlock(block)
	t.keyBytes += int64(len(block.Buf))
	for i, id := range block.IDs {
		p := at(i)
		if int(id) < len(t.row) {
			t.extra, t.extraID = append(t.extra, p), append(t.extraID, id)
			continue
		}
		t.hash = append(t.hash, dataHash{lo[i], hi[i]})
		t.file, t.row = append(t.file, p.File), append(t.row, p.Row)
	}
}

// tableFields are the columns of a table row set aside: its key (encoded) and hash.
var tableFields = []arrow.Field{
	{Name: "_orchestrator_key", Type: arrow.BinaryTypes.Binary},
	{Name: "_orchestrator_lo", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_hi", Type: arrow.PrimitiveTypes.Int64},
}

// snapshotTarget is the target side of a snapshot ingest: the table's data columns
// (lineage aside), set aside as (key, hash) with each row's place.
func (s *Ingest) snapshotTarget(snap *delta.Snapshot, data []string) *keyed.Target {
	var h rowHashes
	return keyed.NewTarget(snap, keyed.TargetSpec{
		Columns: data, ReadAhead: true, All: true, KeepNone: true, ExtraFields: tableFields,
		Select: func(rec arrow.RecordBatch) ([]int, func(int) bool, error) {
			return columnsByName(rec.Schema(), s.cfg.Keys), nil, nil
		},
		Extra: func(_ context.Context, rec arrow.RecordBatch, keep []int32) ([]arrow.Array, error) {
			if err := h.hash(rec, columnsByName(rec.Schema(), s.cfg.Keys), s.hashedColumns(rec.Schema(), data), nil); err != nil {
				return nil, err
			}
			return h.arrays(), nil // (every row is kept)
		},
	})
}

// arrays are the key, lo and hi arrays of the record h hashed.
func (h *rowHashes) arrays() []arrow.Array {
	asInt64 := func(v []uint64) []int64 { return arrow.Int64Traits.CastFromBytes(arrow.Uint64Traits.CastToBytes(v)) }
	return []arrow.Array{keyed.KeyArray(&h.Block), keyed.Int64s(asInt64(h.lo)), keyed.Int64s(asInt64(h.hi))}
}

// tablePass is pass 1 in memory, running on goroutines of its own.
type tablePass struct {
	scanned chan struct{} // closed once the table is read (its last keys are still being indexed)
	done    chan struct{}
	cancel  context.CancelFunc
	table   *snapTable
	err     error
}

// startTable starts pass 1 on the live scan of target.
func (s *Ingest) startTable(ctx context.Context, target *keyed.Target, data []string) *tablePass {
	ctx, cancel := context.WithCancel(ctx)
	p := &tablePass{scanned: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.table, p.err = s.snapshotTable(ctx, target, data, p.scanned)
	}()
	return p
}

// wait returns pass 1's table once it is done.
func (p *tablePass) wait() (*snapTable, error) {
	<-p.done
	return p.table, p.err
}

// snapshotTable is pass 1 in memory: the scan's records are hashed (on both cores)
// while the previous record's keys go into the index. It closes scanned once the scan
// is read.
func (s *Ingest) snapshotTable(ctx context.Context, target *keyed.Target, data []string, scanned chan<- struct{}) (*snapTable, error) {
	t := &snapTable{}
	rows, sized := target.Snapshot().NumRecords()
	type hashed struct {
		h  *rowHashes
		tr keyed.TargetRecord
	}
	free, ready := make(chan *rowHashes, 2), make(chan hashed, 1)
	free <- &rowHashes{}
	free <- &rowHashes{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ready)
		defer close(scanned)
		return target.Each(gctx, 0, keyed.Ranges, func(tr keyed.TargetRecord) error {
			var h *rowHashes
			select {
			case h = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			rec := tr.Rec
			if err := h.hash(rec, columnsByName(rec.Schema(), s.cfg.Keys), s.hashedColumns(rec.Schema(), data), nil); err != nil {
				return err
			}
			select {
			case ready <- hashed{h: h, tr: tr}:
			case <-gctx.Done():
				return gctx.Err()
			}
			return nil
		})
	})
	g.Go(func() error {
		// The index is made (its pages written, a few milliseconds for a million keys)
		// while the scan decodes its first record.
		if sized {
			t.index = keyindex.New(int(rows))
			t.hash = make([]dataHash, 0, rows)
			t.file, t.row = make([]int32, 0, rows), make([]int64, 0, rows)
		} else {
			t.index = keyindex.New(1 << 10)
		}
		for r := range ready {
			if sized && r.h.Len() > 0 {
				// The keys' bytes, estimated from the first record's, are made room
				// for at once: growing the arena as it fills would copy it again and again.
				t.index.Grow(int(int64(len(r.h.Buf)) * rows / int64(r.h.Len()) * 9 / 8))
				sized = false
			}
			t.add(&r.h.Block, r.h.lo, r.h.hi, r.tr.Place)
			free <- r.h
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	t.side.withSeq = s.cfg.SequenceBy != ""
	t.side.grow(len(t.row))
	return t, nil
}

// readTableKeys is pass 1 of a pass over spill files: the table's rows of its key
// ranges, as set aside (key, hash, place). A key held twice by the table has its later
// rows in extra.
func readTableKeys(ctx context.Context, p *keyed.Pass, withSeq bool) (*snapTable, error) {
	// The pass knows how many rows it reads: the index and the slices are made for them
	// at once, not grown by copying (a pass holds millions).
	n := int(p.TargetRows())
	t := &snapTable{index: keyindex.New(max(n, 1<<10)), hash: make([]dataHash, 0, n), file: make([]int32, 0, n), row: make([]int64, 0, n)}
	var block keyindex.Block
	var lo, hi []uint64
	err := p.EachTarget(ctx, func(tr keyed.TargetRecord) error {
		keys := tr.Extra[0].(*array.Binary)
		if t.keyBytes == 0 && keys.Len() > 0 {
			t.index.Grow(n * (len(keys.ValueBytes())/keys.Len() + 1))
		}
		block.Reset()
		for i := range keys.Len() {
			block.Buf = append(block.Buf, keys.Value(i)...)
			block.End()
		}
		lo, hi = asUint64(tr.Extra[1], lo), asUint64(tr.Extra[2], hi)
		t.add(&block, lo, hi, tr.Place)
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.side.withSeq = withSeq
	t.side.grow(len(t.row))
	return t, nil
}

// asUint64 is an int64 array's values as uint64 (in buf's room).
func asUint64(a arrow.Array, buf []uint64) []uint64 {
	v := a.(*array.Int64).Int64Values()
	buf = slices.Grow(buf[:0], len(v))[:len(v)]
	for i, x := range v {
		buf[i] = uint64(x)
	}
	return buf
}

// handOver sets aside the table's keys, as the target's rows of their ranges (pass 1
// over the budget, without reading the table again).
func (t *snapTable) handOver(ctx context.Context, target *keyed.Target, dir *keyed.Dir) error {
	n := len(t.row) + len(t.extra)
	for lo := 0; lo < n; lo += 1 << 16 {
		hi := min(lo+1<<16, n)
		mem := memory.DefaultAllocator
		kb, lb, hb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
		places, ranges := make([]keyed.Place, 0, hi-lo), make([]uint16, 0, hi-lo)
		for i := lo; i < hi; i++ {
			id, p := int32(i), keyed.Place{}
			if i < len(t.row) {
				p = t.place(i)
			} else {
				id, p = t.extraID[i-len(t.row)], t.extra[i-len(t.row)]
			}
			key := t.index.Key(id)
			kb.Append(key)
			lb.Append(int64(t.hash[id].lo))
			hb.Append(int64(t.hash[id].hi))
			places, ranges = append(places, p), append(ranges, keyed.Range(key))
		}
		cols := []arrow.Array{kb.NewArray(), lb.NewArray(), hb.NewArray()}
		kb.Release()
		lb.Release()
		hb.Release()
		rec := array.NewRecordBatch(arrow.NewSchema(tableFields, nil), cols, int64(hi-lo))
		arrowx.ReleaseArrays(cols)
		err := target.WriteSpilled(ctx, dir, rec, places, ranges)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return target.Finish(dir)
}

// errTableKeysGone says pass 1 did not finish (an earlier error ended it).
var errTableKeysGone = errors.New("internal error: the table's keys are not read")

// hashedColumns are the columns of data (in schema) whose values a row's hash covers:
// all but the keys, which the key index compares.
func (s *Ingest) hashedColumns(schema *arrow.Schema, data []string) []int {
	return columnsByName(schema, slices.DeleteFunc(slices.Clone(data), func(c string) bool {
		return slices.ContainsFunc(s.cfg.Keys, func(k string) bool { return strings.EqualFold(k, c) })
	}))
}

// columnsByName returns the index in schema of each name (-1: absent).
func columnsByName(schema *arrow.Schema, names []string) []int {
	out := make([]int, len(names))
	for j, n := range names {
		out[j] = slices.IndexFunc(schema.Fields(), func(f arrow.Field) bool { return strings.EqualFold(f.Name, n) })
	}
	return out
}
