package keyed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Place is a target row: its file (an index into the target snapshot's Files) and its
// index there.
type Place struct {
	File int32
	Row  int64
}

// Rows are target rows a stage kept: row At[i] of Recs (of the table's Arrow schema).
// The zero Rows keeps none.
type Rows struct {
	Recs []arrow.RecordBatch
	At   []Ref
}

// Sink takes a run's MERGE source, pass after pass, and commits it as ONE MERGE
// (delta.MergeInParts) with the stage's transaction. Direct (a run in one pass, in
// memory): what the pass gives is one part, merged at Commit. Parted (a run in several
// passes): each pass's rows go to spill files, merged at Commit in parts: the matched
// rows file by file, then the inserts in their order (parted). Either way the inserts
// are inserted in the order (ord, ord2) they were given, so identity values and the
// change feed do not depend on the passes.
type Sink struct {
	mp     *delta.MergeInParts
	files  []*delta.Add
	source *arrow.Schema
	table  *arrow.Schema // target rows kept (nil: none)
	parted *parted       // nil: direct
	onPart func(int)
	mu     sync.Mutex // Matched and Inserts (passes run two at once)

	// direct: the source so far (matched rows, then inserts at Commit), the matches by
	// file, and the inserts with their order.
	src     []arrow.RecordBatch
	nsrc    int32
	matches map[int32]*fileMatches
	kept    []arrow.RecordBatch // target rows kept (retained)
	ins     []arrow.RecordBatch
	insOrd  [2][]int64
	flushed bool // a direct sink's part is merged (Flush)
	done    bool
}

// fileMatches are a file's matches in a direct sink: target row, source row, and the
// kept row (when the stage keeps them).
type fileMatches struct {
	target []int64
	source []int32
	held   []Ref // into Sink.kept
}

// SinkOptions make a sink.
type SinkOptions struct {
	// Merge is the MERGE (its Tx's snapshot is the target read); Source the schema of
	// its source rows; Table, when the stage keeps the target rows it matches, the
	// table's Arrow schema.
	Merge  *delta.MergeInParts
	Snap   *delta.Snapshot
	Source *arrow.Schema
	Table  *arrow.Schema
	// Parted: the passes' rows go to spill files in Dir, merged in parts of about Limit
	// bytes.
	Parted bool
	Dir    *Dir
	Limit  int64
	// OnPart is told of each part merged.
	OnPart func(parts int)
}

// NewSink makes a sink.
func NewSink(o SinkOptions) (*Sink, error) {
	s := &Sink{mp: o.Merge, files: o.Snap.Files(), source: o.Source, table: o.Table, onPart: o.OnPart, matches: map[int32]*fileMatches{}}
	if o.Parted {
		if o.Dir == nil {
			return nil, errors.New("internal error: a parted sink without a spill directory")
		}
		s.parted = &parted{dir: o.Dir, files: s.files, source: o.Source, table: o.Table, limit: max(o.Limit, 1)}
	}
	return s, nil
}

// Matched adds source rows src that match the target rows at places (row i of src
// matches places[i]); rows are those target rows when the stage keeps them.
func (s *Sink) Matched(ctx context.Context, src arrow.RecordBatch, rows Rows, places []Place) error {
	if int(src.NumRows()) != len(places) || (s.table != nil && len(rows.At) != len(places)) {
		return fmt.Errorf("internal error: %d matched source rows for %d places and %d kept rows", src.NumRows(), len(places), len(rows.At))
	}
	if len(places) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parted != nil {
		return s.parted.addMatched(ctx, src, rows, places)
	}
	if s.flushed {
		return errors.New("internal error: rows added to a sink after its flush")
	}
	src.Retain()
	s.src = append(s.src, src)
	base := int32(len(s.kept))
	if s.table != nil {
		for _, r := range rows.Recs {
			r.Retain()
		}
		s.kept = append(s.kept, rows.Recs...)
	}
	for i, p := range places {
		fm := s.matches[p.File]
		if fm == nil {
			fm = &fileMatches{}
			s.matches[p.File] = fm
		}
		fm.target, fm.source = append(fm.target, p.Row), append(fm.source, s.nsrc+int32(i))
		if s.table != nil {
			at := rows.At[i]
			fm.held = append(fm.held, Ref{Rec: base + at.Rec, Row: at.Row})
		}
	}
	s.nsrc += int32(len(places))
	return nil
}

// Inserts adds source rows src to insert, row i at order (ord[i], ord2[i]) (ord2 nil:
// 0) among all the run's inserts.
func (s *Sink) Inserts(ctx context.Context, src arrow.RecordBatch, ord, ord2 []int64) error {
	if int(src.NumRows()) != len(ord) || ord2 != nil && len(ord2) != len(ord) {
		return fmt.Errorf("internal error: %d rows to insert for %d orders", src.NumRows(), len(ord))
	}
	if len(ord) == 0 {
		return nil
	}
	if ord2 == nil {
		ord2 = make([]int64, len(ord))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parted != nil {
		return s.parted.addInserts(ctx, src, ord, ord2)
	}
	if s.flushed {
		return errors.New("internal error: rows added to a sink after its flush")
	}
	src.Retain()
	s.ins = append(s.ins, src)
	s.insOrd[0], s.insOrd[1] = append(s.insOrd[0], ord...), append(s.insOrd[1], ord2...)
	return nil
}

// Flush merges a direct sink's one part now (writing its files), so that the run can
// do other work before it commits, such as a stage's other table written meanwhile;
// nothing may be added after it. A parted sink merges its parts at Commit: Flush does
// nothing.
func (s *Sink) Flush(ctx context.Context) error {
	if s.parted != nil || s.flushed {
		return nil
	}
	if s.done {
		return errors.New("internal error: a sink flushed after its commit")
	}
	s.flushed = true
	return s.mergeDirect(ctx)
}

// Commit merges what the passes gave (unless Flush did) and commits it, with the
// MERGE's transaction, as one commit.
func (s *Sink) Commit(ctx context.Context) (*delta.MergeResult, error) {
	if s.done {
		return nil, errors.New("internal error: a sink committed twice")
	}
	if s.parted != nil {
		s.done = true
		if err := s.parted.run(ctx, s.mp, s.onPart); err != nil {
			return nil, err
		}
		return s.mp.Commit(ctx)
	}
	if err := s.Flush(ctx); err != nil {
		return nil, err
	}
	s.done = true
	return s.mp.Commit(ctx)
}

// mergeDirect merges a direct sink's source as one part.
func (s *Sink) mergeDirect(ctx context.Context) error {
	if s.nsrc == 0 && len(s.ins) == 0 {
		return nil
	}
	source := slices.Clone(s.src)
	if len(s.ins) > 0 {
		all, err := arrowx.Concat(memory.DefaultAllocator, s.ins)
		if err != nil {
			return err
		}
		defer all.Release()
		perm := insertOrder(s.insOrd[0], s.insOrd[1])
		if !isIdentity(perm) {
			sorted, err := arrowx.GatherRows(ctx, all, perm)
			if err != nil {
				return err
			}
			defer sorted.Release()
			all = sorted
		}
		source = append(source, all)
	}
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	var kept []arrow.RecordBatch
	defer func() { arrowx.ReleaseRecords(kept) }()
	for f, fm := range s.matches {
		perm := make([]int32, len(fm.target))
		for i := range perm {
			perm[i] = int32(i)
		}
		slices.SortFunc(perm, func(a, b int32) int { return cmp.Compare(fm.target[a], fm.target[b]) })
		m := &delta.FileMatches{Target: make([]int64, len(perm)), Source: make([]int32, len(perm))}
		for i, p := range perm {
			m.Target[i], m.Source[i] = fm.target[p], fm.source[p]
		}
		if s.table != nil {
			refs := make([]Ref, len(perm))
			for i, p := range perm {
				refs[i] = fm.held[p]
			}
			rows, err := Gather(ctx, s.kept, refs, 0)
			if err != nil {
				return err
			}
			kept = append(kept, rows...)
			m.Rows = rows
		}
		pos.Files[s.files[f].Path] = m
	}
	return s.mp.Merge(ctx, source, pos)
}

// Release frees what a sink holds.
func (s *Sink) Release() {
	arrowx.ReleaseRecords(s.src)
	arrowx.ReleaseRecords(s.ins)
	arrowx.ReleaseRecords(s.kept)
	s.src, s.ins, s.kept, s.matches = nil, nil, nil, nil
}

func isIdentity(perm []int32) bool {
	for i, p := range perm {
		if int(p) != i {
			return false
		}
	}
	return true
}

// Source is the schema of the MERGE source rows.
func (s *Sink) Source() *arrow.Schema { return s.source }
