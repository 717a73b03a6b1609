package jobs

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Pass 2 of snapshot mode (ingest_snapshot.go), on a run's decoded records in memory
// (snapshotFiles) or, over the memory budget, on the records of a pass over spill files
// (ingest_snapshot_spill.go).

// snapKeyCost is what a key costs pass 1 and pass 2 in memory (index, hashes, place,
// side), besides its bytes.
const snapKeyCost = 90

// snapState is pass 2 at work: the table's side, the new keys' side and index, and the
// rows kept so far.
type snapState struct {
	s          *Ingest
	files      []*sourceFile
	data       []string
	table      *snapTable
	fresh      *snapSide
	freshIndex *keyindex.Index
	freshOrd   []int64 // per new key: the order of its first row (passes over spill files)
	kept       []arrow.RecordBatch
	keptRows   int32
	keptBytes  int64
	pred       delta.Predicate
	extra      []string
	matcher    *delta.Matcher
	seqText    func(int64) string
	rows       rowHashes // the record at hand's, looked up in the table's index
	miss       keyindex.Block
	// In passes over spill files, a row's problem (a key twice, a null sequence) does
	// not stop the pass: the one of the earliest row is kept (firstOrd), so that the
	// run fails naming what a run in memory names, the first problem in file order.
	firstErr error
	firstOrd int64
	// top is the newest sequence_by value of the rows weighed (hasTop: one was).
	top    int64
	hasTop bool
	// absent and tableKeys count, once a pass over spill files is weighed, the table's
	// keys its files lack and all the table's keys, in its key ranges.
	absent, tableKeys int64
}

// problem records a row's problem: in memory (ords nil) it ends the run at once; in a
// pass it is kept when it is the earliest so far, and the row is skipped.
func (st *snapState) problem(ords *array.Int64, i int, err error) error {
	if ords == nil {
		return err
	}
	if st.firstErr == nil || ords.Value(i) < st.firstOrd {
		st.firstErr, st.firstOrd = err, ords.Value(i)
	}
	return nil
}

func (s *Ingest) newSnapState(snap *delta.Snapshot, files []*sourceFile, data []string, table *snapTable) (*snapState, error) {
	st := &snapState{s: s, files: files, data: data, table: table, fresh: &snapSide{withSeq: s.cfg.SequenceBy != ""}, freshIndex: keyindex.New(1 << 10)}
	if s.cfg.DeleteWhen != "" {
		p, err := delta.ParsePredicate(s.cfg.DeleteWhen)
		if err != nil {
			return nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		st.pred, st.extra = p, delta.PredicateColumns(p)
	}
	if s.cfg.SequenceBy != "" {
		st.seqText = sequenceText(snap.Schema().Field(s.cfg.SequenceBy).Type)
	}
	return st, nil
}

// mark returns a decoded record of file f with its delete marks (deleteColumn).
func (st *snapState) mark(rec arrow.RecordBatch, f *sourceFile) (arrow.RecordBatch, error) {
	if st.matcher == nil && st.pred != nil {
		var err error
		if st.matcher, err = delta.NewMatcher(st.pred, schemaOfRecord(rec)); err != nil {
			return nil, fmt.Errorf("delete_when %q (a predicate over the source row): %w", st.s.cfg.DeleteWhen, err)
		}
	}
	marked, err := withDeleteMarks(rec, st.matcher)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return marked, nil
}

// add weighs the rows of a marked record of file fi (ords, in passes over spill files:
// each row's order among all the files' rows).
func (st *snapState) add(ctx context.Context, marked arrow.RecordBatch, fi int, ords *array.Int64) error {
	s, table, fresh, f := st.s, st.table, st.fresh, st.files[fi]
	sch := marked.Schema()
	keyCols := columnsByName(sch, s.cfg.Keys)
	lines := marked.Column(columnsByName(sch, []string{lineColumn})[0]).(*array.Int64)
	dels := marked.Column(columnsByName(sch, []string{deleteColumn})[0]).(*array.Boolean)
	var seqs arrow.Array
	if st.seqText != nil {
		seqs = marked.Column(columnsByName(sch, []string{s.cfg.SequenceBy})[0])
	}
	if err := st.rows.hash(marked, keyCols, s.hashedColumns(sch, st.data), table.index); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	los, his := st.rows.lo, st.rows.hi
	// Rows of new keys: indexed among themselves.
	miss := &st.miss
	miss.Reset()
	for i, id := range st.rows.IDs {
		if id >= 0 {
			miss.Skip()
			continue
		}
		var err error
		if miss.Buf, err = keyed.AppendKey(miss.Buf, marked, keyCols, i); err != nil {
			return err
		}
		miss.End()
	}
	st.freshIndex.AddBlock(miss)
	fresh.grow(st.freshIndex.Len())
	var keep []int32
	for i, id := range st.rows.IDs {
		sd, target := &table.side, true
		if id < 0 {
			sd, id, target = fresh, miss.IDs[i], false
			if ords != nil && int(id) == len(st.freshOrd) {
				st.freshOrd = append(st.freshOrd, ords.Value(i))
			}
		}
		r := snapRow{file: int32(fi), line: lines.Value(i), del: dels.Value(i), lo: los[i], hi: his[i]}
		if seqs != nil {
			var ok bool
			if r.seq, ok = seqValue(seqs, i); !ok {
				if err := st.problem(ords, i, fmt.Errorf("%s:%d: key %s: sequence_by column %s is null", f.Name, r.line, keyText(marked, keyCols, i), s.cfg.SequenceBy)); err != nil {
					return err
				}
				continue
			}
			if !st.hasTop || r.seq > st.top {
				st.top, st.hasTop = r.seq, true
			}
		}
		stands, clash := sd.offer(id, r)
		if clash {
			if err := st.problem(ords, i, sd.clash(id, r, st.files, keyText(marked, keyCols, i), st.seqText)); err != nil {
				return err
			}
			continue
		}
		if !stands {
			continue
		}
		k := &sd.keys[id]
		if k.kept >= 0 {
			sd.superseded++
		}
		k.kept = -1
		if r.del || target && r.lo == table.hash[id].lo && r.hi == table.hash[id].hi {
			continue // the table's row stands (or goes): nothing to keep
		}
		k.kept = st.keptRows + int32(len(keep))
		keep = append(keep, int32(i))
	}
	if len(keep) > 0 {
		g, err := delta.GatherRows(ctx, marked, keep)
		if err != nil {
			return err
		}
		st.kept = append(st.kept, g)
		st.keptRows += int32(len(keep))
		st.keptBytes += recordBytes(g)
	}
	return nil
}
