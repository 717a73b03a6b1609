package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Snapshot mode, streamed: a run's files are the table's whole content, and memory holds
// a key index of the table and the rows that change, not the extract. Two passes:
//
//  1. The table is scanned once: per key a 128-bit hash of its other data columns
//     (lineage columns aside) and its row's place in its file (the MERGE matches by
//     position).
//  2. The files are decoded once. A row whose key the table has and whose hash equals
//     it changes nothing; one that differs updates the table's row; one with a new key
//     inserts; a key twice is an error naming both places, or with sequence_by the last
//     by sequence stands (a delete wins a tie, two different rows at one sequence are
//     an error); a row delete_when marks makes its key absent. Only the rows that
//     update or insert are kept.
//
// Table keys the files lack (or mark deleted) are deletes. One MERGE commits the
// deletes, updates and inserts with the files' txns, reading only the table files that
// change.

// snapTable is pass 1: the table's keys, with per key id its hash and place, and what
// pass 2 decided for it.
type snapTable struct {
	index *keyindex.Index
	hash  []dataHash
	files []string // the table's data files (Add.Path), by index
	file  []int32  // per key: its row's file (index into files) ...
	row   []int64  // ... and index there
	extra []rowAt  // rows of keys the table holds twice (another writer's doing): deleted
	side  snapSide
}

// rowAt returns where key id's row is.
func (t *snapTable) rowAt(id int) rowAt { return rowAt{file: t.files[t.file[id]], row: t.row[id]} }

// snapSide is pass 2's state for a set of keys (the table's, or the new ones): per key
// (keys) whether the files have it, the standing row (its place, whether it is a
// delete, and with sequence_by its sequence and hash), and which kept row carries it
// (-1: none, the table's row stands). A key's state is one struct, so that weighing a
// row touches one cache line: 16 bytes a key without sequence_by.
type snapSide struct {
	withSeq    bool
	keys       []snapKey
	seq        []int64
	hash       []dataHash
	superseded int // kept rows that a later row of their key replaced
}

// snapKey is one key's state in a snapSide.
type snapKey struct {
	file      int32
	line      uint32 // saturates at 2^32-1 (shown as such in messages)
	kept      int32
	seen, del bool
}

// dataHash is the 128-bit hash of a row's data columns.
type dataHash struct{ lo, hi uint64 }

func (sd *snapSide) grow(n int) {
	k := n - len(sd.keys)
	if k <= 0 {
		return
	}
	sd.keys = slices.Grow(sd.keys, k)
	for range k {
		sd.keys = append(sd.keys, snapKey{kept: -1})
	}
	if sd.withSeq {
		sd.seq = append(sd.seq, make([]int64, k)...)
		sd.hash = append(sd.hash, make([]dataHash, k)...)
	}
}

// rowHashes is, per row of a record, its key (in Block, for a key index) and the 128-bit
// hash of its data columns (lo, hi); reused from record to record.
type rowHashes struct {
	keyindex.Block
	other  keyindex.Block // the second half's keys, before they join Block
	halves [2]rowHasher
	lo, hi []uint64
}

// hash fills h for rec, the two halves of a large record at once. With in set, it also
// looks the keys up there (Block.IDs).
func (h *rowHashes) hash(rec arrow.RecordBatch, keyCols, dataCols []int, in *keyindex.Index) error {
	n := int(rec.NumRows())
	h.lo, h.hi = slices.Grow(h.lo[:0], n)[:n], slices.Grow(h.hi[:0], n)[:n]
	half := n / 2
	if n < 4096 {
		half = n
	}
	var errOther error
	var wg sync.WaitGroup
	if half < n {
		wg.Go(func() { errOther = h.part(&h.other, &h.halves[1], rec, keyCols, dataCols, half, n, in) })
	}
	err := h.part(&h.Block, &h.halves[0], rec, keyCols, dataCols, 0, half, in)
	wg.Wait()
	if err = errors.Join(err, errOther); err != nil {
		return err
	}
	if half < n {
		h.Append(&h.other)
	}
	return nil
}

func (h *rowHashes) part(block *keyindex.Block, rh *rowHasher, rec arrow.RecordBatch, keyCols, dataCols []int, from, to int, in *keyindex.Index) error {
	block.Reset()
	if err := keyed.AppendKeys(block, rec, keyCols, from, to); err != nil {
		return err
	}
	rh.reset(rec, dataCols)
	rh.hash(rec, from, to, h.lo, h.hi)
	if in != nil {
		in.LookupBlock(block)
	}
	return nil
}

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

// loadSnapshot runs a snapshot ingest of files.
func (s *Ingest) loadSnapshot(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, res *Result) error {
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	limit := workingSet(env.budget(s.cfg.MemoryBudget))
	if len(snap.Files()) == 0 && s.cfg.SequenceBy == "" {
		return s.loadFirstSnapshot(ctx, env, decl, tbl, snap, files, loadTime, limit, res)
	}
	data := s.dataColumns(snap.Schema())
	if n, ok := snap.NumRecords(); ok && n*snapKeyCost > limit {
		// The table's keys alone do not fit: work in passes over spill files.
		return s.loadSnapshotSpilled(ctx, env, decl, tbl, snap, files, data, loadTime, limit, res)
	}
	// Pass 2 starts decoding the files while pass 1 still scans the table; its first
	// record waits for pass 1's index.
	pass1 := s.startSnapshotTable(ctx, snap, data)
	defer pass1.cancel()
	committed := res.RowsWritten
	st, kept, bad, err := s.snapshotFiles(ctx, env, snap, files, data, pass1, loadTime, limit, res)
	res.RowsWritten = committed // rows count as written when the MERGE writes them
	defer func() { releaseRecords(kept) }()
	if err != nil {
		pass1.cancel() // (done already unless pass 2 failed first)
	}
	table, err1 := pass1.wait()
	if err == nil {
		err = err1 // a table pass 2 never waited for (no rows)
	}
	if errors.Is(err, errOverBudget) {
		// Too large for memory: decode again into spill files and work in passes.
		releaseRecords(kept)
		table, kept = nil, nil
		return s.loadSnapshotSpilled(ctx, env, decl, tbl, snap, files, data, loadTime, limit, res)
	}
	if err != nil {
		return err
	}
	keptRows := 0
	for _, r := range kept {
		keptRows += int(r.NumRows())
	}
	keep, matches, deletes := snapshotChanges(table, st.fresh, keptRows)
	asOf, err := s.snapshotTime(snap, files, st.top, st.hasTop)
	if err != nil {
		return err
	}
	if err := s.checkDeleteShare(decl, files, table.absent(), int64(len(table.row))); err != nil {
		return err
	}
	var rows []arrow.RecordBatch
	if keep != nil {
		if rows, err = gatherKept(ctx, kept, keep); err != nil {
			return err
		}
	} else {
		rows = slices.Clone(kept)
		for _, r := range rows {
			r.Retain()
		}
	}
	defer releaseRecords(rows)
	sch, err := s.sourceSchema(snap)
	if err != nil {
		return err
	}
	if deletes > 0 {
		del := deleteRows(sch, deletes)
		defer del.Release()
		rows = append(rows, del)
	}
	if err := s.quarantine(ctx, env, files, bad, loadTime, res); err != nil {
		return err
	}
	return s.mergeSnapshot(ctx, env, decl, tbl, snap, files, sch, rows, matches, asOf, res)
}

// absent is the number of the table's keys that pass 2 did not see in the files (those
// that delete_when marked are not counted).
func (t *snapTable) absent() int64 {
	var n int64
	for id := range t.row {
		if !t.side.keys[id].seen {
			n++
		}
	}
	return n
}

// snapshotChanges is what passes 1 and 2 decided, as the MERGE's source and matches:
// the kept rows that stand, then one row per delete (their number: deletes); matches
// name the updates and deletes by place, the other rows insert. When all keptRows kept
// rows stand (no later row of a key replaced one), the source is the kept rows as they
// are and keep is nil; otherwise it is the kept rows at the indexes keep lists, table
// keys' first.
func snapshotChanges(table *snapTable, fresh *snapSide, keptRows int) (keep []int32, matches *delta.MergePositions, deletes int) {
	sd := &table.side
	nkeep := keptRows - sd.superseded - fresh.superseded // the deletes' source rows come after them
	asKept := nkeep == keptRows
	if !asKept {
		keep = make([]int32, 0, nkeep)
	}
	matches = &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	// Ids are in scan order, so each file's matches come in row order (sorted below
	// when that is not so: rows the table holds twice, a file met twice).
	sorted := len(table.extra) == 0
	var fm *delta.FileMatches
	last := int32(-1)
	for id, f := range table.file {
		var source int32
		switch k := &sd.keys[id]; {
		case !k.seen || k.del:
			source = int32(nkeep + deletes)
			deletes++
		case k.kept >= 0 && asKept:
			source = k.kept
		case k.kept >= 0:
			source = int32(len(keep))
			keep = append(keep, k.kept)
		default:
			continue
		}
		if f != last {
			last, fm = f, matches.Files[table.files[f]]
			if fm != nil {
				sorted = false
			} else {
				fm = &delta.FileMatches{}
				matches.Files[table.files[f]] = fm
			}
		}
		fm.Target, fm.Source = append(fm.Target, table.row[id]), append(fm.Source, source)
	}
	if !asKept {
		for _, k := range fresh.keys {
			if !k.del && k.kept >= 0 {
				keep = append(keep, k.kept)
			}
		}
	}
	for _, at := range table.extra {
		addMatch(matches, at, int32(nkeep+deletes))
		deletes++
	}
	if !sorted {
		for _, fm := range matches.Files {
			sortMatches(fm)
		}
	}
	return keep, matches, deletes
}

// mergeSnapshot commits a snapshot's changes, rows (of schema sch) matched by place to
// the table's rows, as one MERGE with the files' txns.
func (s *Ingest) mergeSnapshot(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, sch *arrow.Schema, rows []arrow.RecordBatch, matches *delta.MergePositions, asOf *int64, res *Result) error {
	names := fileNames(files)
	lineage := env.lineage()
	lineage.SourceFiles = names
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	setSnapshotTxns(tx, files, asOf)
	if len(rows) == 0 {
		rows = []arrow.RecordBatch{array.NewRecordBatch(sch, emptyColumns(sch), 0)}
		defer rows[0].Release()
	}
	mr, err := tbl.Merge(ctx, delta.MergeOptions{
		Source:    rows,
		On:        s.cfg.Keys,
		NullSafe:  true,
		Positions: matches,
		WhenMatched: []delta.MergeClause{
			{Cond: delta.Eq("source."+deleteColumn, true), Action: delta.MergeDelete},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
		Tx:             tx,
		Lineage:        lineage,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	return nil
}

// tablePass is pass 1 running on a goroutine of its own.
type tablePass struct {
	scanned chan struct{} // closed once the table is read (its last keys are still being indexed)
	done    chan struct{}
	cancel  context.CancelFunc
	table   *snapTable
	err     error
}

// startSnapshotTable starts pass 1.
func (s *Ingest) startSnapshotTable(ctx context.Context, snap *delta.Snapshot, data []string) *tablePass {
	ctx, cancel := context.WithCancel(ctx)
	p := &tablePass{scanned: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.table, p.err = s.snapshotTable(ctx, snap, data, p.scanned)
	}()
	return p
}

// wait returns pass 1's table once it is done.
func (p *tablePass) wait() (*snapTable, error) {
	<-p.done
	return p.table, p.err
}

// snapshotTable is pass 1: the scan's records are hashed (on both cores) while the
// previous record's keys go into the index. It closes scanned once the scan is read.
func (s *Ingest) snapshotTable(ctx context.Context, snap *delta.Snapshot, data []string, scanned chan<- struct{}) (*snapTable, error) {
	t := &snapTable{}
	rows, sized := snap.NumRecords()
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: data, FilesOnly: true, ReadAhead: true})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	type hashed struct {
		h     *rowHashes
		file  string
		first int64
	}
	free, ready := make(chan *rowHashes, 2), make(chan hashed, 1)
	free <- &rowHashes{}
	free <- &rowHashes{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ready)
		defer close(scanned)
		for sc.Next() {
			rec := sc.RecordBatch()
			file, first, ok := sc.Position()
			if !ok {
				return fmt.Errorf("the scan of the table lost the positions of its rows")
			}
			var h *rowHashes
			select {
			case h = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			if err := h.hash(rec, columnsByName(rec.Schema(), s.cfg.Keys), s.hashedColumns(rec.Schema(), data), nil); err != nil {
				return err
			}
			select {
			case ready <- hashed{h: h, file: file.Path, first: first}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return sc.Err()
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
			if len(t.files) == 0 || t.files[len(t.files)-1] != r.file {
				t.files = append(t.files, r.file)
			}
			t.index.AddBlock(&r.h.Block)
			for i, id := range r.h.IDs {
				if int(id) < len(t.row) {
					t.extra = append(t.extra, rowAt{file: r.file, row: r.first + int64(i)})
					continue
				}
				t.hash = append(t.hash, dataHash{r.h.lo[i], r.h.hi[i]})
				t.file, t.row = append(t.file, int32(len(t.files)-1)), append(t.row, r.first+int64(i))
			}
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

// snapshotFiles is pass 2: it returns the new keys' side and the kept rows. With limit
// set, it fails with errOverBudget once what it holds (with the table's keys) would
// exceed it.
func (s *Ingest) snapshotFiles(ctx context.Context, env *Env, snap *delta.Snapshot, files []*sourceFile, data []string, pass1 *tablePass, loadTime time.Time, limit int64, res *Result) (*snapState, []arrow.RecordBatch, []*badRecord, error) {
	st, err := s.newSnapState(snap, files, data, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	// The files are opened when pass 1 has read the table: their first records are
	// decoded on the core its last keys leave idle.
	select {
	case <-pass1.scanned:
	case <-pass1.done:
	}
	var bad []*badRecord
	for fi, f := range files {
		b, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: st.extra, lines: true}, func(rec arrow.RecordBatch) error {
			if st.table == nil {
				var err error
				if st.table, err = pass1.wait(); err != nil {
					return err
				}
			}
			table := st.table
			marked, err := st.mark(rec, f)
			if err != nil {
				return err
			}
			defer marked.Release()
			if err := st.add(ctx, marked, fi, nil); err != nil {
				return err
			}
			if limit > 0 && int64(len(table.row))*snapKeyCost+st.keptBytes+int64(len(st.fresh.keys))*snapKeyCost > limit {
				return errOverBudget
			}
			return nil
		})
		bad = append(bad, b...)
		if err != nil {
			return nil, st.kept, nil, err
		}
	}
	return st, st.kept, bad, nil
}

// snapRow is a decoded row as pass 2 weighs it.
type snapRow struct {
	file   int32
	line   int64
	seq    int64
	lo, hi uint64
	del    bool
}

// offer records row r for key id and reports whether it stands (see snapshot mode); a
// row that clashes with the one standing (a key twice; with sequence_by, two different
// rows at one sequence) changes nothing, and clash tells what it is.
func (sd *snapSide) offer(id int32, r snapRow) (stands, clash bool) {
	k := &sd.keys[id]
	if !k.seen {
		sd.set(id, r)
		return true, false
	}
	if !sd.withSeq {
		return false, true
	}
	switch {
	case r.seq > sd.seq[id]:
	case r.seq < sd.seq[id] || k.del:
		return false, false
	case r.del:
	case r.lo != sd.hash[id].lo || r.hi != sd.hash[id].hi:
		return false, true
	default:
		return false, false // an exact duplicate
	}
	sd.set(id, r)
	return true, false
}

// clash is the error of row r of key (as the user wrote it) that offer found clashing
// with the row standing for id.
func (sd *snapSide) clash(id int32, r snapRow, files []*sourceFile, key string, seqText func(int64) string) error {
	k := &sd.keys[id]
	here := fmt.Sprintf("%s:%d", files[r.file].Name, r.line)
	there := fmt.Sprintf("%s:%d", files[k.file].Name, k.line)
	if sd.withSeq {
		return fmt.Errorf("key %s has two different rows at the same sequence value %s (%s and %s); make sequence_by unique per key", key, seqText(r.seq), there, here)
	}
	if k.file == r.file {
		return fmt.Errorf("%s: key %s is on lines %d and %d; set sequence_by on the stage to keep the last of a key's rows, or remove the duplicate", files[r.file].Name, key, k.line, r.line)
	}
	return fmt.Errorf("key %s is in %s and %s; a snapshot holds each key once (set sequence_by to keep the last)", key, there, here)
}

func (sd *snapSide) set(id int32, r snapRow) {
	k := &sd.keys[id]
	k.seen, k.file, k.line, k.del = true, r.file, uint32(min(r.line, math.MaxUint32)), r.del
	if sd.withSeq {
		sd.seq[id], sd.hash[id] = r.seq, dataHash{r.lo, r.hi}
	}
}

// gatherKept returns the kept rows at the given indexes (among all kept rows), in that
// order, as records of at most 64 Ki rows.
func gatherKept(ctx context.Context, kept []arrow.RecordBatch, idx []int32) ([]arrow.RecordBatch, error) {
	starts := make([]int32, len(kept)+1)
	for i, r := range kept {
		starts[i+1] = starts[i] + int32(r.NumRows())
	}
	var out []arrow.RecordBatch
	for lo := 0; lo < len(idx); {
		// A run of indexes in one kept record, in order, is one gather.
		r := sort.Search(len(kept), func(k int) bool { return starts[k+1] > idx[lo] })
		hi := lo
		var rows []int32
		for hi < len(idx) && idx[hi] >= starts[r] && idx[hi] < starts[r+1] && len(rows) < 1<<16 {
			rows = append(rows, idx[hi]-starts[r])
			hi++
		}
		g, err := delta.GatherRows(ctx, kept[r], rows)
		if err != nil {
			releaseRecords(out)
			return nil, err
		}
		out = append(out, g)
		lo = hi
	}
	return out, nil
}

// emptyColumns are zero-length arrays of a schema's fields.
func emptyColumns(sch *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sch.NumFields())
	for i, f := range sch.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	return cols
}
func keyText(rec arrow.RecordBatch, keyCols []int, i int) string {
	parts := make([]string, len(keyCols))
	for j, c := range keyCols {
		if rec.Column(c).IsNull(i) {
			parts[j] = "NULL"
		} else {
			parts[j] = rec.Column(c).ValueStr(i)
		}
	}
	return strings.Join(parts, "|")
}

// rowAt is a table row: its file (Add.Path) and its index there.
type rowAt struct {
	file string
	row  int64
}

// deleteColumns are the file columns delete_when reads (decoded again in pass 3, so
// that the rows have pass 1's columns).
func (s *Ingest) deleteColumns() []string {
	if s.cfg.DeleteWhen == "" {
		return nil
	}
	p, err := delta.ParsePredicate(s.cfg.DeleteWhen)
	if err != nil {
		return nil
	}
	return delta.PredicateColumns(p)
}

// sourceSchema is the schema of the kept rows: the table's columns, the file columns
// delete_when reads that the table lacks (strings, as decodeFileWith adds them), the
// line and the delete mark.
func (s *Ingest) sourceSchema(snap *delta.Snapshot) (*arrow.Schema, error) {
	sch, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return nil, err
	}
	fields := slices.Clone(sch.Fields())
	for _, c := range s.deleteColumns() {
		if snap.Schema().Field(c) == nil {
			fields = append(fields, arrow.Field{Name: c, Type: arrow.BinaryTypes.String, Nullable: true})
		}
	}
	fields = append(fields, arrow.Field{Name: lineColumn, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: deleteColumn, Type: arrow.FixedWidthTypes.Boolean})
	return arrow.NewSchema(fields, nil), nil
}

// deleteRows is n source rows that only mark deletes: nulls, the delete mark true.
func deleteRows(sch *arrow.Schema, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, sch.NumFields())
	for i, f := range sch.Fields() {
		if f.Name == deleteColumn {
			b := array.NewBooleanBuilder(memory.DefaultAllocator)
			for range n {
				b.Append(true)
			}
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
	}
	rec := array.NewRecordBatch(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func addMatch(m *delta.MergePositions, at rowAt, source int32) {
	fm := m.Files[at.file]
	if fm == nil {
		fm = &delta.FileMatches{}
		m.Files[at.file] = fm
	}
	fm.Target, fm.Source = append(fm.Target, at.row), append(fm.Source, source)
}

// sortMatches orders a file's matches by target row, as FileMatches requires.
func sortMatches(fm *delta.FileMatches) {
	idx := make([]int, len(fm.Target))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return fm.Target[idx[a]] < fm.Target[idx[b]] })
	t, s := make([]int64, len(idx)), make([]int32, len(idx))
	for i, j := range idx {
		t[i], s[i] = fm.Target[j], fm.Source[j]
	}
	fm.Target, fm.Source = t, s
}
