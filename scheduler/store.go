package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Prefix is where the run store lives in a warehouse. No table may live under it.
const Prefix = "_orchestrator/"

// Layout of the run store, below Prefix:
//
//	runs/<pipeline>/<run id>.json          the run's Record, rewritten as its state changes
//	logs/<pipeline>/<run id>/<stage>.log   a stage's whole log, when the record holds only its end
//	index/<pipeline>/<shard>/<seq>.json    one Entry per run, numbered from 1 (shard = seq/1000)
//	active/<run id>.json                   while a run is queued or running
//	pipelines/<pipeline>/<name>.json       per pipeline: known, anchor, index-hint, retention
//	watermarks.json                        every pipeline's last handled slot
//	requests/<run id>.<kind>.json          a run or cancel for the serve that holds the lease
//	lease/<generation>.json                the scheduler lease (see lease.go)
const (
	runsDir     = Prefix + "runs/"
	logsDir     = Prefix + "logs/"
	indexDir    = Prefix + "index/"
	activeDir   = Prefix + "active/"
	pipesDir    = Prefix + "pipelines/"
	requestsDir = Prefix + "requests/"
	leaseDir    = Prefix + "lease/"
	// leaseProbeDir holds the short-lived objects whose modification time tells a
	// one-look observer the store's clock (LiveLease).
	leaseProbeDir = Prefix + "lease-probe/"
)

// hintEvery is how often (in index entries) the index hint is moved up: listing reads at
// most this many keys to find the newest entry.
const hintEvery = 64

// Store is the run store of one warehouse. It is safe for concurrent use, and any number
// of processes may share one warehouse: ids are claimed with put-if-absent.
type Store struct {
	st       objectstore.Store // where the records are: the warehouse, or the same place without fsync
	wh       objectstore.Store // the warehouse, for the tables
	location string            // the warehouse as the pipelines name it (Runner.Store sets it)

	mu      sync.Mutex       // guards the maps below
	known   map[string]bool  // pipelines whose "known" object this Store has written
	seqs    map[string]int64 // per pipeline, the last index number this Store claimed
	entries map[string]Entry // per active run, the index entry this Store wrote last
	marked  map[string]bool  // active runs whose marker this Store wrote
}

// NewStore returns the run store in the warehouse st.
func NewStore(st objectstore.Store) *Store { return NewStoreIn(st, st) }

// NewStoreIn returns the run store of warehouse wh kept in records: the same place seen
// through another store (a local directory written without fsync: RecordsOpener).
func NewStoreIn(wh, records objectstore.Store) *Store {
	return &Store{st: records, wh: wh, known: map[string]bool{}, seqs: map[string]int64{}, entries: map[string]Entry{}, marked: map[string]bool{}}
}

// Objects returns the warehouse store, which holds the tables.
func (s *Store) Objects() objectstore.Store { return s.wh }

// Location is the warehouse as its pipelines name it (./wh, s3://bucket/prefix), for
// people and metric labels; "" for a store made without a pipeline.
func (s *Store) Location() string { return s.location }

// Entry is a run's line in its pipeline's index: enough to list runs without reading
// their records.
type Entry struct {
	Seq      int64       `json:"seq"`
	ID       string      `json:"id"`
	Pipeline string      `json:"pipeline"`
	Trigger  TriggerKind `json:"trigger"`
	Slot     time.Time   `json:"slot,omitzero"`
	Attempt  int         `json:"attempt"`
	Status   Status      `json:"status"`
	Reason   string      `json:"reason,omitempty"`
	Error    string      `json:"error,omitempty"`
	Created  time.Time   `json:"created"`
	Start    time.Time   `json:"start,omitzero"`
	End      time.Time   `json:"end,omitzero"`
	// Of is the run a retry or rollback is of; RetriedBy the newest retry of this run and
	// RetryStatus its state; RolledBackBy the rollback of this run.
	Of           string `json:"of,omitempty"`
	RetriedBy    string `json:"retried_by,omitempty"`
	RetryStatus  Status `json:"retry_status,omitempty"`
	RolledBackBy string `json:"rolled_back_by,omitempty"`
	// WasInterrupted: an earlier attempt (or this one) was interrupted.
	WasInterrupted bool `json:"was_interrupted,omitempty"`
}

// Outcome is the entry's state as a person should read it (see Outcome).
func (e Entry) Outcome() string { return Outcome(e.Status, e.RetryStatus, e.RolledBackBy != "") }

// Entry returns the run's index entry as it would be written now.
func (r *Record) Entry() Entry { return entryOf(r) }

func entryOf(r *Record) Entry {
	e := Entry{Seq: r.Seq, ID: r.ID, Pipeline: r.Pipeline, Trigger: r.Trigger.Kind, Slot: r.Trigger.Slot,
		Attempt: r.Attempt, Status: r.Status, Reason: r.Reason, Created: r.Created, Start: r.Start, End: r.End,
		Of: r.Trigger.Of, RetryStatus: r.RetryStatus, RolledBackBy: r.RolledBackBy, WasInterrupted: r.Interrupted()}
	if n := len(r.RetriedBy); n > 0 {
		e.RetriedBy = r.RetriedBy[n-1]
	}
	if len(r.Error) > 200 {
		e.Error = r.Error[:200] + "…"
	} else {
		e.Error = r.Error
	}
	return e
}

func recordKey(id string) (string, error) {
	p, _, err := ParseID(id)
	if err != nil {
		return "", err
	}
	return runsDir + p + "/" + id + ".json", nil
}

func indexKey(pipeline string, seq int64) string {
	return fmt.Sprintf("%s%s/%06d/%012d.json", indexDir, pipeline, seq/1000, seq)
}

func stateKey(pipeline, name string) string { return pipesDir + pipeline + "/" + name + ".json" }

func logKey(id, pipeline, stage string) string {
	return logsDir + pipeline + "/" + id + "/" + stage + ".log"
}

// getJSON reads the object at key into v; a missing key gives objectstore.ErrNotExist.
func (s *Store) getJSON(ctx context.Context, key string, v any) error {
	rc, err := s.st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (s *Store) putJSON(ctx context.Context, key string, v any, ifAbsent bool) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	if ifAbsent {
		return s.st.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
	}
	return s.st.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
}

// notFound is an error that says what is missing in the user's terms and wraps
// objectstore.ErrNotExist.
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return objectstore.ErrNotExist }

// Get reads the record of run id.
func (s *Store) Get(ctx context.Context, id string) (*Record, error) {
	key, err := recordKey(id)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := s.getJSON(ctx, key, &r); err != nil {
		if errors.Is(err, objectstore.ErrNotExist) { // the store's key is no business of the user's
			return nil, notFound(fmt.Sprintf("run %s: no such run", id))
		}
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	return &r, nil
}

// Create stores a new record, claiming its id (Claim), and gives it its index entry.
func (s *Store) Create(ctx context.Context, r *Record) error {
	if err := s.Claim(ctx, r); err != nil {
		return err
	}
	return s.Index(ctx, r)
}

// Claim stores a new record, claiming its id: of several creators of one id exactly one
// succeeds, the others get an error wrapping objectstore.ErrExist and change nothing the
// winner wrote. It is the one write a scheduled slot needs before its run starts; the
// record has no index entry (Seq 0) until Index gives it one, which the run's first save
// does as it starts (and whoever finds it interrupted, if it never did).
func (s *Store) Claim(ctx context.Context, r *Record) error {
	key, err := recordKey(r.ID)
	if err != nil {
		return err
	}
	if err := s.noteKnown(ctx, r.Pipeline); err != nil {
		return err
	}
	if r.Status.Active() {
		// Before the record, so that an active record always has its marker; a loser's
		// marker is the winner's key, so it is left.
		if err := s.putJSON(ctx, activeDir+r.ID+".json", map[string]any{"pipeline": r.Pipeline}, false); err != nil {
			return err
		}
	}
	if err := s.putJSON(ctx, key, r, true); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	if r.Status.Active() {
		s.mu.Lock()
		s.marked[r.ID] = true
		s.mu.Unlock()
	}
	return nil
}

// Index gives a claimed record its index entry (Seq) and saves it, if it has none.
func (s *Store) Index(ctx context.Context, r *Record) error {
	if r.Seq > 0 {
		return nil
	}
	seq, err := s.appendEntry(ctx, r)
	if err != nil {
		return err
	}
	r.Seq = seq
	if err := s.Save(ctx, r); err != nil {
		return err
	}
	return nil
}

// Save rewrites a record (its creator's, or a taker's of a stale run) and, when what it
// lists changed, its index entry; a record that is no longer active loses its active
// marker.
func (s *Store) Save(ctx context.Context, r *Record) error {
	key, err := recordKey(r.ID)
	if err != nil {
		return err
	}
	if err := s.putJSON(ctx, key, r, false); err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, err)
	}
	e := entryOf(r)
	s.mu.Lock()
	last, ok := s.entries[r.ID]
	marked := s.marked[r.ID]
	s.mu.Unlock()
	if r.Seq > 0 && (!ok || last != e) {
		if err := s.putJSON(ctx, indexKey(r.Pipeline, r.Seq), e, false); err != nil {
			return fmt.Errorf("save run %s: index: %w", r.ID, err)
		}
	}
	active := r.Status.Active()
	if active && !marked {
		if err := s.putJSON(ctx, activeDir+r.ID+".json", map[string]any{"pipeline": r.Pipeline}, false); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if active {
		s.entries[r.ID], s.marked[r.ID] = e, true
	} else {
		delete(s.entries, r.ID)
		delete(s.marked, r.ID)
	}
	s.mu.Unlock()
	if !active {
		return s.st.Delete(ctx, activeDir+r.ID+".json")
	}
	return nil
}

// noteKnown records that the store has runs of pipeline (Pipelines lists them).
func (s *Store) noteKnown(ctx context.Context, pipeline string) error {
	s.mu.Lock()
	done := s.known[pipeline]
	s.mu.Unlock()
	if done {
		return nil
	}
	err := s.putJSON(ctx, stateKey(pipeline, "known"), map[string]string{"pipeline": pipeline}, true)
	if err != nil && !errors.Is(err, objectstore.ErrExist) {
		return err
	}
	s.mu.Lock()
	s.known[pipeline] = true
	s.mu.Unlock()
	return nil
}

// Pipelines lists the pipelines that have runs in the store, sorted.
func (s *Store) Pipelines(ctx context.Context) ([]string, error) {
	infos, err := s.st.List(ctx, pipesDir, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range infos {
		rest := strings.TrimPrefix(in.Key, pipesDir)
		if p, name, ok := strings.Cut(rest, "/"); ok && name == "known.json" {
			out = append(out, p)
		}
	}
	return out, nil
}

// seqOfKey parses an index key's sequence number.
func seqOfKey(key string) (int64, bool) {
	base := key[strings.LastIndexByte(key, '/')+1:]
	n, err := strconv.ParseInt(strings.TrimSuffix(base, ".json"), 10, 64)
	return n, err == nil && strings.HasSuffix(base, ".json")
}

// latestSeq is the highest index number of pipeline (0 when there is none): the keys
// after the hint are listed, never the whole index.
func (s *Store) latestSeq(ctx context.Context, pipeline string) (int64, error) {
	var hint struct{ Seq int64 }
	if err := s.getJSON(ctx, stateKey(pipeline, "index-hint"), &hint); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return 0, err
	}
	after := ""
	if hint.Seq > 0 {
		after = indexKey(pipeline, hint.Seq)
	}
	infos, err := s.st.List(ctx, indexDir+pipeline+"/", after)
	if err != nil {
		return 0, err
	}
	latest := hint.Seq
	for _, in := range infos {
		if n, ok := seqOfKey(in.Key); ok && n > latest {
			latest = n
		}
	}
	return latest, nil
}

// appendEntry gives r the next index number of its pipeline, claimed with put-if-absent.
// The number this Store claimed last is tried first; when another writer took it, the
// index is listed again.
func (s *Store) appendEntry(ctx context.Context, r *Record) (int64, error) {
	s.mu.Lock()
	latest, cached := s.seqs[r.Pipeline]
	s.mu.Unlock()
	for tries := 0; ; tries++ {
		if !cached {
			var err error
			if latest, err = s.latestSeq(ctx, r.Pipeline); err != nil {
				return 0, fmt.Errorf("run %s: index: %w", r.ID, err)
			}
		}
		seq := latest + 1
		e := entryOf(r)
		e.Seq = seq
		err := s.putJSON(ctx, indexKey(r.Pipeline, seq), e, true)
		if errors.Is(err, objectstore.ErrExist) && tries < 100 {
			cached = false // another writer took it
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("run %s: index: %w", r.ID, err)
		}
		s.mu.Lock()
		s.seqs[r.Pipeline] = max(s.seqs[r.Pipeline], seq)
		s.entries[r.ID] = e // Index's Save need not write it again
		s.mu.Unlock()
		if seq%hintEvery == 0 {
			_ = s.putJSON(ctx, stateKey(r.Pipeline, "index-hint"), map[string]int64{"seq": seq}, false)
		}
		return seq, nil
	}
}

// Filter selects index entries; nil takes every one.
type Filter func(Entry) bool

// List returns the newest runs of pipeline, newest first, at most limit (limit ≤ 0: 50)
// of those filter takes. It reads index entries only, newest first, in batches: the
// newest 50 of 100,000 runs cost a few reads, whatever the history's length; a filter
// that takes few entries reads further back.
func (s *Store) List(ctx context.Context, pipeline string, limit int, filter Filter) ([]Entry, error) {
	if limit <= 0 {
		limit = 50
	}
	latest, err := s.latestSeq(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", pipeline, err)
	}
	var low struct{ Seq int64 }
	if err := s.getJSON(ctx, stateKey(pipeline, "retention"), &low); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return nil, err
	}
	var out []Entry
	seen := map[string]bool{}
	batch := int64(limit)
	for hi := latest; hi > low.Seq && len(out) < limit; {
		lo := max(hi-batch+1, low.Seq+1)
		entries, err := s.readEntries(ctx, pipeline, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", pipeline, err)
		}
		for i := len(entries) - 1; i >= 0 && len(out) < limit; i-- {
			e := entries[i]
			if e == nil || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			if filter == nil || filter(*e) {
				out = append(out, *e)
			}
		}
		hi, batch = lo-1, min(batch*2, 1000)
	}
	return out, nil
}

// readEntries reads index entries lo..hi (nil where one is missing), 16 at a time.
func (s *Store) readEntries(ctx context.Context, pipeline string, lo, hi int64) ([]*Entry, error) {
	out := make([]*Entry, hi-lo+1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for seq := lo; seq <= hi; seq++ {
		g.Go(func() error {
			var e Entry
			err := s.getJSON(gctx, indexKey(pipeline, seq), &e)
			if errors.Is(err, objectstore.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			out[seq-lo] = &e
			return nil
		})
	}
	return out, g.Wait()
}

// ActiveIDs lists the runs marked active (queued or running) in the store.
func (s *Store) ActiveIDs(ctx context.Context) ([]string, error) {
	infos, err := s.st.List(ctx, activeDir, "")
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(infos))
	for _, in := range infos {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(in.Key, activeDir), ".json"))
	}
	return ids, nil
}

// PutLog stores a stage's whole log and returns its key.
func (s *Store) PutLog(ctx context.Context, r *Record, stage string, log []byte) (string, error) {
	key := logKey(r.ID, r.Pipeline, stage)
	return key, s.st.Put(ctx, key, bytes.NewReader(log), int64(len(log)))
}

// Anchor returns the anchor of the pipeline's @every schedule: the first time any
// scheduler saw it (now, if none did before), to the second. It is claimed with
// put-if-absent, so every scheduler of the warehouse plans the same slots.
func (s *Store) Anchor(ctx context.Context, pipeline string, now time.Time) (time.Time, error) {
	var a struct {
		Anchor time.Time `json:"anchor"`
	}
	a.Anchor = now.UTC().Truncate(time.Second)
	err := s.putJSON(ctx, stateKey(pipeline, "anchor"), a, true)
	if errors.Is(err, objectstore.ErrExist) {
		err = s.getJSON(ctx, stateKey(pipeline, "anchor"), &a)
	}
	return a.Anchor, err
}

// watermarksKey holds every pipeline's watermark: the last slot a scheduler handled
// (every slot up to it has a record). Only the lease holder writes it, once per tick.
const watermarksKey = Prefix + "watermarks.json"

// Watermarks returns the pipelines' watermarks (none before the first tick).
func (s *Store) Watermarks(ctx context.Context) (map[string]time.Time, error) {
	w := map[string]time.Time{}
	err := s.getJSON(ctx, watermarksKey, &w)
	if errors.Is(err, objectstore.ErrNotExist) {
		return w, nil
	}
	return w, err
}

// SetWatermarks records the pipelines' watermarks.
func (s *Store) SetWatermarks(ctx context.Context, w map[string]time.Time) error {
	return s.putJSON(ctx, watermarksKey, w, false)
}

// SortEntries orders entries newest first: by creation, then (in one pipeline) by index
// position, then by id.
func SortEntries(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		if a.Pipeline == b.Pipeline {
			return cmp.Compare(b.Seq, a.Seq)
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// StoredAnchor returns the anchor of the pipeline's @every schedule if a scheduler set
// one (Anchor), without setting it.
func (s *Store) StoredAnchor(ctx context.Context, pipeline string) (time.Time, bool) {
	var a struct {
		Anchor time.Time `json:"anchor"`
	}
	if err := s.getJSON(ctx, stateKey(pipeline, "anchor"), &a); err != nil {
		return time.Time{}, false
	}
	return a.Anchor, true
}
