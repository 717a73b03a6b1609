package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// loadFirstSnapshot loads a snapshot into a table with no rows: every row inserts, so the
// files are appended as an append ingest does (on every core, streamed), each key
// checked once in a key index (a key twice is an error before anything commits) and the
// rows delete_when marks left out.
func (s *Ingest) loadFirstSnapshot(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, limit int64, res *Result) (err error) {
	committed := res.RowsWritten
	defer func() {
		if err != nil {
			res.RowsWritten = committed // nothing was written
		}
	}()
	l, err := s.newFirstSnapshot(ctx, env, snap, files, limit)
	if err != nil {
		return err
	}
	defer func() { l.spilled.remove() }()
	var bad []*badRecord
	for fi, f := range files {
		b, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: l.extra, lines: true}, func(rec arrow.RecordBatch) error {
			return l.record(ctx, fi, f, rec)
		})
		bad = append(bad, b...)
		if err != nil {
			l.writer.abort()
			return err
		}
	}
	if l.spilled != nil {
		if err := l.spilled.checkDuplicates(ctx, files, limit); err != nil {
			l.writer.abort()
			return err
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%d keys over the memory budget (%s): checked in passes over spill files", l.spilled.out.rows(), ByteSize(limit*2)))
	}
	adds, err := l.writer.close()
	if err != nil {
		return err
	}
	if err := s.quarantine(ctx, env, files, bad, loadTime, res); err != nil {
		return err
	}
	res.RowsWritten = committed + l.written
	asOf, err := s.snapshotTime(snap, files, 0, false)
	if err != nil {
		return err
	}
	if _, err := commitAppend(ctx, env, decl, tbl, snap, files, adds, l.written, asOf, res); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d inserted into an empty table", strings.Join(fileNames(files), ", "), l.written))
	return nil
}

// firstSnapshot is a first snapshot load under way: its writer, the rows written so far,
// and each key's first place, in a key index until that outgrows the budget (limit),
// then set aside in spill files.
type firstSnapshot struct {
	cfg         *IngestConfig
	env         *Env
	files       []*sourceFile
	limit       int64
	writer      *parallelWriter
	tableSchema *arrow.Schema
	pred        delta.Predicate // delete_when, nil without it
	extra       []string        // the file columns delete_when reads
	matcher     *delta.Matcher  // pred over the decoded records, made from the first
	written     int64

	seen     *snapSide // nil once spilled
	index    *keyindex.Index
	keyBytes int64
	spilled  *firstSnapshotKeys // nil while the keys fit
	block    keyindex.Block     // the keys of the record at hand
}

// newFirstSnapshot starts a first snapshot load: the writer of the files into snap's
// table and the delete_when predicate.
func (s *Ingest) newFirstSnapshot(ctx context.Context, env *Env, snap *delta.Snapshot, files []*sourceFile, limit int64) (*firstSnapshot, error) {
	var sourceBytes int64
	for _, f := range files {
		sourceBytes += f.Size
	}
	opts := delta.WriteOptions{MaxMemory: ingestWriterMemory, StreamFiles: len(snap.PartitionColumns()) == 0}
	writer, err := newParallelWriter(ctx, snap, ingestLanes(sourceBytes), opts)
	if err != nil {
		return nil, err
	}
	tableSchema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		writer.abort()
		return nil, err
	}
	l := &firstSnapshot{cfg: s.cfg, env: env, files: files, limit: limit, writer: writer, tableSchema: tableSchema,
		seen: &snapSide{}, index: keyindex.New(1 << 16)}
	if s.cfg.DeleteWhen != "" {
		if l.pred, err = delta.ParsePredicate(s.cfg.DeleteWhen); err != nil {
			writer.abort()
			return nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		l.extra = delta.PredicateColumns(l.pred)
	}
	return l, nil
}

// record loads a decoded record of file f (files[fi]): its keys are checked and its rows
// that delete_when does not mark are written.
func (l *firstSnapshot) record(ctx context.Context, fi int, f *sourceFile, rec arrow.RecordBatch) error {
	marks, err := l.deleteMarks(f, rec)
	if err != nil {
		return err
	}
	keyCols := columnsByName(rec.Schema(), l.cfg.Keys)
	lines := rec.Column(columnsByName(rec.Schema(), []string{lineColumn})[0]).(*array.Int64)
	l.block.Reset()
	for i := range int(rec.NumRows()) {
		var err error
		if l.block.Buf, err = keyed.AppendKey(l.block.Buf, rec, keyCols, i); err != nil {
			return fmt.Errorf("%s:%d: %w", f.Name, lines.Value(i), err)
		}
		l.block.End()
	}
	var keep []int32
	for i := range int(rec.NumRows()) {
		if marks == nil || !marks[i] {
			keep = append(keep, int32(i))
		}
	}
	if err := l.checkKeys(ctx, fi, rec, keyCols, lines); err != nil {
		return err
	}
	return l.write(ctx, f, rec, keep)
}

// deleteMarks says which of rec's rows delete_when marks (nil without delete_when).
func (l *firstSnapshot) deleteMarks(f *sourceFile, rec arrow.RecordBatch) ([]bool, error) {
	if l.matcher == nil && l.pred != nil {
		var err error
		if l.matcher, err = delta.NewMatcher(l.pred, schemaOfRecord(rec)); err != nil {
			return nil, fmt.Errorf("delete_when %q (a predicate over the source row): %w", l.cfg.DeleteWhen, err)
		}
	}
	if l.matcher == nil {
		return nil, nil
	}
	marks, err := l.matcher.Match(rec)
	if err != nil {
		return nil, fmt.Errorf("%s: delete_when: %w", f.Name, err)
	}
	return marks, nil
}

// checkKeys records the keys of rec's rows (encoded in l.block) with their places: in the
// key index, where a key seen before is an error naming both places, until the index
// outgrows the budget; from then on in spill files, checked at the end.
func (l *firstSnapshot) checkKeys(ctx context.Context, fi int, rec arrow.RecordBatch, keyCols []int, lines *array.Int64) error {
	if l.spilled != nil {
		return l.spilled.addRows(ctx, rec, keyCols, fi, lines)
	}
	l.index.AddBlock(&l.block)
	l.seen.grow(l.index.Len())
	l.keyBytes += int64(len(l.block.Buf))
	for i, id := range l.block.IDs {
		r := snapRow{file: int32(fi), line: lines.Value(i)}
		if _, clash := l.seen.offer(id, r); clash {
			return l.seen.clash(id, r, l.files, keyText(rec, keyCols, i), nil)
		}
	}
	if l.limit > 0 && int64(l.index.Len())*snapKeyCost+l.keyBytes > l.limit {
		var err error
		if l.spilled, err = newFirstSnapshotKeys(l.env, l.limit); err != nil {
			return err
		}
		if err := l.spilled.handOver(ctx, l.index, l.seen); err != nil {
			return err
		}
		l.index, l.seen = nil, nil
	}
	return nil
}

// write writes rec's rows at keep (in the table's columns) from file f.
func (l *firstSnapshot) write(ctx context.Context, f *sourceFile, rec arrow.RecordBatch, keep []int32) error {
	out := projectRecord(rec, l.tableSchema)
	defer out.Release()
	if len(keep) < int(rec.NumRows()) {
		g, err := delta.GatherRows(ctx, out, keep)
		if err != nil {
			return err
		}
		defer g.Release()
		out = g
	}
	l.written += out.NumRows()
	return l.writer.write(out, f.Name)
}

// projectRecord is rec's columns of schema (found by name), in schema's order.
func projectRecord(rec arrow.RecordBatch, schema *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = rec.Column(columnsByName(rec.Schema(), []string{f.Name})[0])
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows())
}

// firstSnapshotKeys sets aside the keys of a first snapshot (loadFirstSnapshot) once the
// key index outgrows its budget: per row its encoded key, its text (for messages: the
// keys of the index handed over have none, as a duplicate is named by its later row),
// its file and line; checkDuplicates then finds a key twice, range by range.
type firstSnapshotKeys struct {
	out *fanout
	dir *spillDir
	mem memory.Allocator
}

var firstSnapshotKeySchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.Binary},
	{Name: "text", Type: arrow.BinaryTypes.String},
	{Name: "file", Type: arrow.PrimitiveTypes.Int64},
	{Name: "line", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func newFirstSnapshotKeys(env *Env, limit int64) (*firstSnapshotKeys, error) {
	dir, err := newSpillDir(env, limit)
	if err != nil {
		return nil, err
	}
	return &firstSnapshotKeys{dir: dir, out: newFanout(dir, firstSnapshotKeySchema, hashParts), mem: memory.DefaultAllocator}, nil
}

// add sets aside keys (encoded) with their texts and places.
func (k *firstSnapshotKeys) add(ctx context.Context, keys [][]byte, texts []string, files, lines []int64) error {
	kb, tb := array.NewBinaryBuilder(k.mem, arrow.BinaryTypes.Binary), array.NewStringBuilder(k.mem)
	defer kb.Release()
	defer tb.Release()
	parts := make([]uint16, len(keys))
	for i, key := range keys {
		kb.Append(key)
		tb.Append(texts[i])
		parts[i] = keyRange(key)
	}
	cols := []arrow.Array{kb.NewArray(), tb.NewArray(), int64Array(files), int64Array(lines)}
	defer releaseAll(cols)
	rec := array.NewRecordBatch(firstSnapshotKeySchema, cols, int64(len(keys)))
	defer rec.Release()
	return k.out.write(ctx, rec, parts)
}

// checkDuplicates finds a key set aside twice, range after range, and names it as the
// in-memory check does.
func (k *firstSnapshotKeys) checkDuplicates(ctx context.Context, files []*sourceFile, limit int64) error {
	if err := k.out.finish(); err != nil {
		return err
	}
	runs := passes(func(p int) int64 { return k.out.partBytes(p) + k.out.partRows(p)*snapKeyCost }, limit)
	// Every duplicate is found; the one of the earliest row (file, line) is named, as a
	// check in memory names it.
	var first error
	var firstAt [2]int64
	for _, r := range runs {
		seen := &snapSide{}
		index := keyindex.New(1 << 10)
		var block keyindex.Block
		err := each(ctx, k.out.files[r[0]:r[1]], func(rec arrow.RecordBatch) error {
			keys, texts := rec.Column(0).(*array.Binary), rec.Column(1).(*array.String)
			fis, lines := rec.Column(2).(*array.Int64), rec.Column(3).(*array.Int64)
			block.Reset()
			for i := range keys.Len() {
				block.Buf = append(block.Buf, keys.Value(i)...)
				block.End()
			}
			index.AddBlock(&block)
			seen.grow(index.Len())
			for i, id := range block.IDs {
				r := snapRow{file: int32(fis.Value(i)), line: lines.Value(i)}
				if _, clash := seen.offer(id, r); clash {
					err := seen.clash(id, r, files, texts.Value(i), nil)
					if at := [2]int64{fis.Value(i), lines.Value(i)}; first == nil || at[0] < firstAt[0] || at[0] == firstAt[0] && at[1] < firstAt[1] {
						first, firstAt = err, at
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return first
}

func (k *firstSnapshotKeys) remove() {
	if k != nil {
		k.dir.remove()
	}
}

// handOver sets aside the keys of the in-memory check so far (index, seen), in the
// order they came.
func (k *firstSnapshotKeys) handOver(ctx context.Context, index *keyindex.Index, seen *snapSide) error {
	for lo := 0; lo < index.Len(); lo += spillChunk {
		hi := min(lo+spillChunk, index.Len())
		keys, texts := make([][]byte, 0, hi-lo), make([]string, hi-lo)
		files, lines := make([]int64, 0, hi-lo), make([]int64, 0, hi-lo)
		for id := lo; id < hi; id++ {
			keys = append(keys, slices.Clone(index.Key(int32(id))))
			files, lines = append(files, int64(seen.keys[id].file)), append(lines, int64(seen.keys[id].line))
		}
		if err := k.add(ctx, keys, texts, files, lines); err != nil {
			return err
		}
	}
	return nil
}

// addRows sets aside the keys of rec's rows (of file fi).
func (k *firstSnapshotKeys) addRows(ctx context.Context, rec arrow.RecordBatch, keyCols []int, fi int, lines *array.Int64) error {
	n := int(rec.NumRows())
	keys, texts := make([][]byte, 0, n), make([]string, n)
	files, ls := make([]int64, n), make([]int64, n)
	var buf []byte
	for i := range n {
		var err error
		if buf, err = keyed.AppendKey(buf[:0], rec, keyCols, i); err != nil {
			return err
		}
		keys = append(keys, slices.Clone(buf))
		texts[i], files[i], ls[i] = keyText(rec, keyCols, i), int64(fi), lines.Value(i)
	}
	return k.add(ctx, keys, texts, files, ls)
}
