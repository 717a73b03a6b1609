package jobs

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The dimension rows used here have three data columns: key, tracked, type1.
var testSCDSpec = scdSpec{keys: []int{0}, tracked: []int{1}, type1: []int{2}, end: SeqMax}

// memDim is an in-memory dimension the tests apply changes to. Like the stage with a
// change feed source, it keeps an event log (every event merged, by key, as the stage's
// log rows hold them: no values) and the highest sequence merged (the watermark); a key
// with a late event is folded from its logged events and the batch's.
type memDim struct {
	rows      map[int64]scdVersion
	nextSK    int64
	log       map[string][]eventFact
	batches   int64
	watermark int64
	hasW      bool
	snapshot  bool // a snapshot source: no log, late events fold with the stored versions
}

func newMemDim() *memDim { return &memDim{rows: map[int64]scdVersion{}, log: map[string][]eventFact{}} }

func (d *memDim) merge(t *testing.T, spec scdSpec, batch []scdEvent) error {
	t.Helper()
	d.batches++
	byKey := map[string][]scdEvent{}
	var order []string
	batch = slices.Clone(batch)
	for i := range batch {
		if batch[i].commit == 0 {
			batch[i].commit = d.batches
		}
	}
	for _, e := range batch {
		k := keyString(eventKeyRow(e), spec.keys)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], e)
	}
	type plan struct {
		key      string
		existing []scdVersion
		events   []scdEvent
		all      bool
	}
	var plans []plan
	place := func(evs []scdEvent) []scdEvent {
		if spec.physByCommit {
			return placePhysicalDeletes(evs)
		}
		return evs
	}
	for _, k := range order {
		evs, err := normalizeBatch(k, place(withoutIgnoredDeletes(&spec, slices.Clone(byKey[k]))), nil)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			continue
		}
		var existing []scdVersion
		for _, v := range d.rows {
			if keyString(v.Row, spec.keys) == k {
				existing = append(existing, v)
			}
		}
		late := d.hasW && evs[0].seq <= d.watermark
		for _, v := range existing {
			late = late || v.From >= evs[0].seq || v.To != spec.end && v.To >= evs[0].seq
		}
		p := plan{key: k, existing: existing, events: evs}
		if late && !d.snapshot {
			recorded, lost := loggedEvents(&spec, d.log[k], existing)
			if lost > 0 {
				t.Fatalf("key %s: %d logged events have no stored version", k, lost)
			}
			mine := slices.Clone(byKey[k])
			for i := range mine {
				if !mine[i].delete {
					mine[i].hash = rowHash(mine[i].row)
				}
			}
			if p.events, err = normalizeBatch(k, place(withoutIgnoredDeletes(&spec, append(recorded, mine...))), nil); err != nil {
				return err
			}
			p.all = true
		}
		plans = append(plans, p)
	}
	for _, e := range batch {
		if !d.hasW || e.seq > d.watermark {
			d.watermark, d.hasW = e.seq, true
		}
		f := eventFact{seq: e.seq, del: e.delete, phys: e.phys, rowSeq: e.rowSeq, commit: e.commit}
		if !e.delete {
			f.hash, f.type1 = rowHash(e.row), type1Values(&spec, e.row)
		}
		k := keyString(eventKeyRow(e), spec.keys)
		d.log[k] = append(d.log[k], f)
	}
	for _, p := range plans {
		for _, c := range foldKey(&spec, p.existing, p.events, p.all, func() int64 { d.nextSK++; return d.nextSK }) {
			switch c.Kind {
			case "insert":
				if _, dup := d.rows[c.New.SK]; dup {
					t.Fatalf("insert reuses surrogate key %d", c.New.SK)
				}
				d.rows[c.New.SK] = *c.New
			case "update":
				if c.Old.SK != c.New.SK {
					t.Fatalf("update changes surrogate key %d -> %d", c.Old.SK, c.New.SK)
				}
				d.rows[c.New.SK] = *c.New
			case "delete":
				delete(d.rows, c.Old.SK)
			}
		}
	}
	return nil
}

// eventKeyRow gives a row carrying the event's key (deletes carry it in row too here).
func eventKeyRow(e scdEvent) []any { return e.row }

// checkInvariants asserts rule 7 of STAGES.md.
func (d *memDim) checkInvariants(t *testing.T, spec scdSpec) {
	t.Helper()
	byKey := map[string][]scdVersion{}
	for sk, v := range d.rows {
		if sk != v.SK {
			t.Fatalf("row stored under %d has SK %d", sk, v.SK)
		}
		k := keyString(v.Row, spec.keys)
		byKey[k] = append(byKey[k], v)
	}
	for k, vs := range byKey {
		slices.SortFunc(vs, func(a, b scdVersion) int { return cmp.Compare(a.From, b.From) })
		current := 0
		for i, v := range vs {
			if v.From >= v.To {
				t.Errorf("key %s: empty or inverted interval [%d,%d)", k, v.From, v.To)
			}
			if v.Current != (v.To == spec.end) {
				t.Errorf("key %s: is_current=%v but valid_to=%d", k, v.Current, v.To)
			}
			if v.Current {
				current++
			}
			if i > 0 && vs[i-1].To > v.From {
				t.Errorf("key %s: overlapping intervals [%d,%d) and [%d,%d)", k, vs[i-1].From, vs[i-1].To, v.From, v.To)
			}
			if i > 0 && vs[i-1].To == v.From && !vs[i-1].Tombstone && !v.Tombstone && rowsEqualAt(vs[i-1].Row, v.Row, spec.tracked) {
				t.Errorf("key %s: adjacent versions at %d with equal tracked values", k, v.From)
			}
		}
		if current > 1 {
			t.Errorf("key %s: %d current rows", k, current)
		}
	}
}

// canonical renders the dimension without surrogate key values, for comparing runs.
func (d *memDim) canonical() string {
	var lines []string
	for _, v := range d.rows {
		lines = append(lines, fmt.Sprintf("%v [%d,%d) current=%v tomb=%v", v.Row, v.From, v.To, v.Current, v.Tombstone))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func upsert(key string, seq int64, tracked, type1 any) scdEvent {
	return scdEvent{seq: seq, row: []any{key, tracked, type1}}
}

func del(key string, seq int64) scdEvent {
	return scdEvent{seq: seq, delete: true, row: []any{key, nil, nil}}
}

func TestSCD2Scenarios(t *testing.T) {
	tests := []struct {
		name    string
		deletes string
		batches [][]scdEvent
		want    []string
	}{
		{
			name:    "move city makes a closed row and a new current row",
			batches: [][]scdEvent{{upsert("c1", 10, "Seattle", "x")}, {upsert("c1", 20, "Portland", "x")}},
			want:    []string{"[c1 Seattle x] [10,20) current=false tomb=false", "[c1 Portland x] [20,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "equal tracked values are a no-op",
			batches: [][]scdEvent{{upsert("c1", 10, "Seattle", "x")}, {upsert("c1", 20, "Seattle", "x")}},
			want:    []string{"[c1 Seattle x] [10,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "change to NULL is a change",
			batches: [][]scdEvent{{upsert("c1", 10, "Seattle", "x")}, {upsert("c1", 20, nil, "x")}},
			want:    []string{"[c1 Seattle x] [10,20) current=false tomb=false", "[c1 <nil> x] [20,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "type 1 column overwrites every version in place",
			batches: [][]scdEvent{{upsert("c1", 10, "Seattle", "a"), upsert("c1", 20, "Portland", "a")}, {upsert("c1", 30, "Portland", "b")}},
			want:    []string{"[c1 Seattle b] [10,20) current=false tomb=false", "[c1 Portland b] [20,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "late event splits the interval it falls in",
			batches: [][]scdEvent{{upsert("c1", 10, "A", nil), upsert("c1", 30, "C", nil)}, {upsert("c1", 20, "B", nil)}},
			want:    []string{"[c1 A <nil>] [10,20) current=false tomb=false", "[c1 B <nil>] [20,30) current=false tomb=false", "[c1 C <nil>] [30,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "late event before the first version prepends one",
			batches: [][]scdEvent{{upsert("c1", 10, "A", nil)}, {upsert("c1", 5, "Z", nil)}},
			want:    []string{"[c1 Z <nil>] [5,10) current=false tomb=false", "[c1 A <nil>] [10,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "delete closes the current row and a returning key gets a new version",
			deletes: "close",
			batches: [][]scdEvent{{upsert("c1", 10, "A", nil)}, {del("c1", 20)}, {upsert("c1", 30, "A", nil)}},
			want:    []string{"[c1 A <nil>] [10,20) current=false tomb=false", "[c1 A <nil>] [30,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "deletes ignored",
			deletes: "ignore",
			batches: [][]scdEvent{{upsert("c1", 10, "A", nil)}, {del("c1", 20)}},
			want:    []string{"[c1 A <nil>] [10,253402214400000000) current=true tomb=false"},
		},
		{
			name:    "tombstone marks the deletion with a current null row",
			deletes: "tombstone",
			batches: [][]scdEvent{{upsert("c1", 10, "A", "t")}, {del("c1", 20)}},
			want:    []string{"[c1 A t] [10,20) current=false tomb=false", "[c1 <nil> <nil>] [20,253402214400000000) current=true tomb=true"},
		},
		{
			name:    "exact duplicates in a batch are dropped and a delete wins at one sequence",
			deletes: "close",
			batches: [][]scdEvent{{upsert("c1", 10, "A", nil), upsert("c1", 10, "A", nil), upsert("c1", 20, "B", nil), del("c1", 20)}},
			want:    []string{"[c1 A <nil>] [10,20) current=false tomb=false"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSCDSpec
			spec.deletes = tc.deletes
			if spec.deletes == "" {
				spec.deletes = "close"
			}
			d := newMemDim()
			for _, b := range tc.batches {
				if err := d.merge(t, spec, b); err != nil {
					t.Fatal(err)
				}
				d.checkInvariants(t, spec)
			}
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := d.canonical(); got != strings.Join(want, "\n") {
				t.Errorf("dimension:\ngot:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

func TestSCD2ConflictingEventsInOneBatch(t *testing.T) {
	d := newMemDim()
	err := d.merge(t, scdSpec{keys: []int{0}, tracked: []int{1}, deletes: "close", end: SeqMax},
		[]scdEvent{upsert("c9", 10, "A", nil), upsert("c9", 10, "B", nil)})
	var dup *DuplicateSequenceError
	if !errors.As(err, &dup) || dup.Key != "c9" || dup.Seq != 10 {
		t.Fatalf("err = %v, want a DuplicateSequenceError naming key c9 at 10", err)
	}
	if !strings.Contains(err.Error(), "key c9") {
		t.Errorf("message %q does not name the key", err)
	}
}

// TestSCD2BatchSplitsAgree is the SCD2 fold's property test: random event streams
// (random order across and within batches, so events arrive late; duplicates, NULL
// transitions, deletes, returning keys) merged in random batch splits give the same
// dimension as one big batch, which equals the reference fold, and rule 7 holds after
// every batch. Late keys are folded from their logged events; the others with the
// stored versions.
func TestSCD2BatchSplitsAgree(t *testing.T) {
	for _, deletes := range []string{"ignore", "close", "tombstone"} {
		t.Run(deletes, func(t *testing.T) {
			spec := testSCDSpec
			spec.deletes = deletes
			for seed := range propertySeeds(300) {
				rng := rand.New(rand.NewPCG(seed, 7))
				stream := randomStream(rng)
				whole := newMemDim()
				if err := whole.merge(t, spec, stream); err != nil {
					t.Fatalf("seed %d: one batch: %v", seed, err)
				}
				whole.checkInvariants(t, spec)
				ref, err := referenceFold(spec, stream)
				if err != nil {
					t.Fatalf("seed %d: reference: %v", seed, err)
				}
				if got := whole.canonical(); got != ref {
					t.Fatalf("seed %d: one batch differs from the reference fold\nstream: %v\ngot:\n%s\nwant:\n%s", seed, stream, got, ref)
				}
				for split := range 3 {
					shuffled := slices.Clone(stream)
					if split > 0 {
						// Split 0 keeps the stream's own order; the others shuffle it.
						rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					}
					parts := randomSplit(rng, shuffled)
					d := newMemDim()
					for _, p := range parts {
						if err := d.merge(t, spec, p); err != nil {
							t.Fatalf("seed %d split %d: %v", seed, split, err)
						}
						d.checkInvariants(t, spec)
					}
					if got, want := d.canonical(), whole.canonical(); got != want {
						t.Fatalf("seed %d split %d (%d batches): dimension differs from one batch\nstream: %v\ngot:\n%s\nwant:\n%s", seed, split, len(parts), stream, got, want)
					}
				}
			}
		})
	}
}

// randomStream makes events over a few keys with unique (key, sequence) pairs, plus exact
// duplicates of some of them.
func randomStream(rng *rand.Rand) []scdEvent {
	keys := []string{"k1", "k2", "k3"}
	values := []any{nil, "a", "b", "c"}
	var evs []scdEvent
	used := map[string]bool{}
	for range 4 + rng.IntN(20) {
		k := keys[rng.IntN(len(keys))]
		seq := int64(1 + rng.IntN(40))
		id := fmt.Sprint(k, seq)
		if used[id] {
			continue
		}
		used[id] = true
		var e scdEvent
		if rng.IntN(6) == 0 {
			e = del(k, seq)
		} else {
			e = upsert(k, seq, values[rng.IntN(len(values))], values[rng.IntN(len(values))])
		}
		evs = append(evs, e)
		if rng.IntN(5) == 0 {
			evs = append(evs, e) // exact duplicate
		}
	}
	return evs
}

// randomSplit cuts evs into consecutive batches (copies).
func randomSplit(rng *rand.Rand, evs []scdEvent) [][]scdEvent {
	var parts [][]scdEvent
	for len(evs) > 0 {
		n := 1 + rng.IntN(len(evs))
		parts = append(parts, slices.Clone(evs[:n]))
		evs = evs[n:]
	}
	return parts
}

// Across batches as within one: a second upsert with other values at a sequence merged
// before is refused, a delete at it wins, an exact repeat changes nothing.
func TestSCD2SameSequenceAcrossBatches(t *testing.T) {
	spec := testSCDSpec
	spec.deletes = "close"
	for _, tc := range []struct {
		name    string
		batches [][]scdEvent
		want    string // the dimension, or the error
	}{
		{"other values in one batch", [][]scdEvent{{upsert("k", 5, "a", "x"), upsert("k", 5, "b", "x")}}, "key k has two different upserts at the same sequence value 5"},
		{"other values in two batches", [][]scdEvent{{upsert("k", 5, "a", "x")}, {upsert("k", 5, "b", "x")}}, "key k has two different upserts at the same sequence value 5"},
		{"other type 1 value in two batches", [][]scdEvent{{upsert("k", 5, "a", "x"), upsert("k", 9, "b", "y")}, {upsert("k", 5, "a", "z")}}, "key k has two different upserts at the same sequence value 5"},
		{"delete wins in one batch", [][]scdEvent{{upsert("k", 3, "a", "x"), upsert("k", 5, "b", "x"), del("k", 5)}}, "[k a x] [3,5) current=false tomb=false"},
		{"delete wins in two batches", [][]scdEvent{{upsert("k", 3, "a", "x"), upsert("k", 5, "b", "x")}, {del("k", 5)}}, "[k a x] [3,5) current=false tomb=false"},
		{"delete stays in two batches", [][]scdEvent{{upsert("k", 3, "a", "x"), del("k", 5)}, {upsert("k", 5, "b", "x")}}, "[k a x] [3,5) current=false tomb=false"},
		{"exact repeat", [][]scdEvent{{upsert("k", 3, "a", "x")}, {upsert("k", 3, "a", "x")}}, "[k a x] [3,253402214400000000) current=true tomb=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newMemDim()
			var err error
			for _, b := range tc.batches {
				if err = d.merge(t, spec, b); err != nil {
					break
				}
				d.checkInvariants(t, spec)
			}
			got := d.canonical()
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// A late event between events the dimension kept no trace of is placed exactly: after
// it, a repeat of the older values is a change back; a delete of an absent key closes it.
func TestSCD2LateEventAmongFoldedEvents(t *testing.T) {
	spec := testSCDSpec
	spec.deletes = "close"
	for _, tc := range []struct {
		name    string
		batches [][]scdEvent
		want    []string
	}{
		{"between confirmations", [][]scdEvent{{upsert("k", 10, "A", "x")}, {upsert("k", 30, "A", "x")}, {upsert("k", 50, "A", "x")}, {upsert("k", 20, "B", "x")}},
			[]string{"[k A x] [10,20) current=false tomb=false", "[k B x] [20,30) current=false tomb=false", "[k A x] [30,253402214400000000) current=true tomb=false"}},
		{"before a delete of an absent key", [][]scdEvent{{upsert("k", 10, "A", "x"), del("k", 20)}, {del("k", 40)}, {upsert("k", 30, "B", "x")}},
			[]string{"[k A x] [10,20) current=false tomb=false", "[k B x] [30,40) current=false tomb=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newMemDim()
			for _, b := range tc.batches {
				if err := d.merge(t, spec, b); err != nil {
					t.Fatal(err)
				}
				d.checkInvariants(t, spec)
			}
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := d.canonical(); got != strings.Join(want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// referenceFold is the dimension of a set of events, computed the plain way the rules
// say, independently of foldKey: per key, sort by sequence (a delete wins a tie; two
// different upserts at one sequence are an error), drop the events whose tracked values
// equal the open version's (NULL = NULL), and chain half-open intervals; type 1 columns
// take the newest upsert's values everywhere. With ignore_null_updates an upsert's NULL
// non-key columns take the open version's values (none open: they stay NULL) before it
// is compared, and type 1 columns take the newest non-NULL value of each; with
// first_valid_from the key's first version starts at it.
func referenceFold(spec scdSpec, events []scdEvent) (string, error) {
	byKey := map[string][]scdEvent{}
	for _, e := range events {
		k := keyString(e.row, spec.keys)
		byKey[k] = append(byKey[k], e)
	}
	var lines []string
	for k, evs := range byKey {
		bySeq := map[int64][]scdEvent{}
		for _, e := range evs {
			if e.delete && spec.deletes == "ignore" {
				continue // an ignored delete has no effect at all
			}
			bySeq[e.seq] = append(bySeq[e.seq], e)
		}
		var seqs []int64
		for q := range bySeq {
			seqs = append(seqs, q)
		}
		slices.Sort(seqs)
		type ver struct {
			row      []any
			from, to int64
			tomb     bool
		}
		var vers []*ver
		var cur *ver
		var type1 []any
		for _, q := range seqs {
			group := bySeq[q]
			var e *scdEvent
			for i := range group {
				if group[i].delete {
					e = &group[i]
				}
			}
			if e == nil {
				e = &group[0]
				for i := range group {
					if fmt.Sprint(group[i].row) != fmt.Sprint(e.row) {
						return "", fmt.Errorf("key %s has two different upserts at the same sequence value %d", k, q)
					}
				}
				if spec.ignoreNulls {
					if type1 == nil {
						type1 = make([]any, len(e.row))
					}
					for c, v := range e.row {
						if v != nil {
							type1[c] = v
						}
					}
				} else {
					type1 = e.row
				}
			}
			if e.delete {
				if spec.deletes == "ignore" || cur == nil || cur.tomb {
					continue
				}
				cur.to, cur = q, nil
				if spec.deletes == "tombstone" {
					row := make([]any, len(e.row))
					for _, c := range spec.keys {
						row[c] = e.row[c]
					}
					cur = &ver{row: row, from: q, tomb: true}
					vers = append(vers, cur)
				}
				continue
			}
			row := slices.Clone(e.row)
			if spec.ignoreNulls && cur != nil && !cur.tomb {
				for c := range row {
					if row[c] == nil && !slices.Contains(spec.keys, c) {
						row[c] = cur.row[c]
					}
				}
			}
			if cur != nil && !cur.tomb && fmt.Sprint(pick(cur.row, spec.tracked)) == fmt.Sprint(pick(row, spec.tracked)) {
				continue
			}
			if cur != nil {
				cur.to = q
			}
			cur = &ver{row: row, from: q}
			vers = append(vers, cur)
		}
		if cur != nil {
			cur.to = spec.end
		}
		if spec.hasFirstFrom && len(vers) > 0 {
			vers[0].from = spec.firstFrom
		}
		for _, v := range vers {
			if !v.tomb {
				for _, c := range spec.type1 {
					v.row[c] = type1[c]
				}
			}
			lines = append(lines, fmt.Sprintf("%v [%d,%d) current=%v tomb=%v", v.row, v.from, v.to, v.to == spec.end, v.tomb))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

func pick(row []any, cols []int) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = row[c]
	}
	return out
}
