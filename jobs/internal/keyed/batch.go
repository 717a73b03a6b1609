package keyed

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Holder is a stage's live pass: it takes the batch's records as they are read (the
// stage's batch form: the rows with what the stage knows of each, such as a sequence,
// a delete mark, a file and an order) while what it holds fits the run's budget.
type Holder interface {
	// Add takes a record of the batch.
	Add(ctx context.Context, rec arrow.RecordBatch) error
	// Held is what it holds, in bytes (its records and what it built of them, by the
	// stage's measured estimates).
	Held() int64
	// HandOver writes what it holds to b (Batch.Spill), in the batch form and in the
	// order it took it, and lets go of it: the run goes on over spill files.
	HandOver(ctx context.Context, b *Batch) error
}

// Batch is a run's keyed batch: its records go to the stage's live pass while they
// fit the budget; when they would not, the live pass hands what it holds to key hash
// range spill files (Fanout) and every later record goes there too. Nothing is read
// twice. A batch may have groups (an upsert's files, each merged in a commit of its
// own): its records come group after group, each group with its own ranges.
type Batch struct {
	run       *Run
	live      Holder // nil once handed over
	keys      []int  // key columns of the batch records
	coded     bool   // keys[0] holds the encoded keys
	filter    bool   // a filter of each group's keys is kept
	join      bool
	twoAtOnce bool
	form      func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)
	group     func(rec arrow.RecordBatch) int
	groups    []*batchGroup // once spilled, by group
	cur       int           // the group being written
	schema    *arrow.Schema
	buf       []byte
	ranges    []uint16
	hashes    []uint64 // (the keys' xxhashes, for the filter)
	rows      int64
}

// batchGroup is a group's rows set aside and a filter of their keys.
type batchGroup struct {
	out    *Fanout
	filter Filter
}

// BatchOptions shape a batch.
type BatchOptions struct {
	// Keys are the key columns of the batch's records; with EncodedKey, Keys[0] is a
	// binary column of the keys as AppendKey encodes them.
	Keys       []int
	EncodedKey bool
	// Group, when set, tells a record's group (0, 1, ...; in the order they come).
	Group func(rec arrow.RecordBatch) int
	// Groups is how many groups the batch has (their key filters share the budget).
	Groups int
	// NoFilter: the target is set aside whole (TargetSpec.All), no filter of the
	// batch's keys is needed.
	NoFilter bool
	// Form, when set, makes a record added after the hand-over the form set aside (a
	// stage whose live pass takes less than it sets aside).
	Form func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)
	// Join: a record read back may hold rows of several records set aside (Fanout.Join),
	// for a stage whose batch form carries all it needs in each row (not, say, its
	// source file as a fact of the record).
	Join bool
	// TwoAtOnce: passes over spill files run two at a time (each planned at half the
	// budget), for a stage whose pass body may run beside itself; its results must not
	// depend on the order the passes end in.
	TwoAtOnce bool
}

// NewBatch starts a batch whose records go to live while they fit.
func (r *Run) NewBatch(live Holder, o BatchOptions) *Batch {
	return &Batch{run: r, live: live, keys: o.Keys, coded: o.EncodedKey, filter: !o.NoFilter, join: o.Join, twoAtOnce: o.TwoAtOnce, form: o.Form, group: o.Group, groups: make([]*batchGroup, max(o.Groups, 1))}
}

// Spilled reports whether the batch went to spill files.
func (b *Batch) Spilled() bool { return b.live == nil }

// Rows is the number of rows added.
func (b *Batch) Rows() int64 { return b.rows }

// Add adds a record: to the live pass, which hands over when it would hold more than
// the budget, or to spill files.
func (b *Batch) Add(ctx context.Context, rec arrow.RecordBatch) error {
	b.rows += rec.NumRows()
	if b.live == nil {
		if b.form == nil {
			return b.Spill(ctx, rec)
		}
		out, err := b.form(ctx, rec)
		if err != nil {
			return err
		}
		defer out.Release()
		return b.Spill(ctx, out)
	}
	if err := b.live.Add(ctx, rec); err != nil {
		return err
	}
	if b.live.Held() <= b.run.Limit {
		return nil
	}
	return b.HandOver(ctx)
}

// HandOver has the live pass hand what it holds to spill files (at once: a stage that
// knows its batch will not fit; or when it would hold more than the budget).
func (b *Batch) HandOver(ctx context.Context) error {
	if b.live == nil {
		return nil
	}
	live := b.live
	b.live = nil
	if _, err := b.run.Dir(); err != nil {
		return err
	}
	return live.HandOver(ctx, b)
}

// Spill sets aside a record of the batch form by the key hash ranges of its rows.
func (b *Batch) Spill(ctx context.Context, rec arrow.RecordBatch) error {
	if b.live != nil {
		return fmt.Errorf("internal error: a record set aside while the batch is held")
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	g := 0
	if b.group != nil {
		g = b.group(rec)
	}
	if g < b.cur || g >= len(b.groups) {
		return fmt.Errorf("internal error: a record of group %d after group %d (of %d)", g, b.cur, len(b.groups))
	}
	if b.schema == nil {
		b.schema = rec.Schema()
	} else if !b.schema.Equal(rec.Schema()) {
		return fmt.Errorf("the source's columns changed within the batch (%s, then %s); run it in smaller batches or raise memory_budget", b.schema, rec.Schema())
	}
	dir, err := b.run.Dir()
	if err != nil {
		return err
	}
	for ; b.cur < g; b.cur++ { // the groups before g are complete
		if err := b.finishGroup(b.cur); err != nil {
			return err
		}
	}
	gr := b.groups[g]
	if gr == nil {
		gr = &batchGroup{out: NewFanout(dir, b.schema)}
		if b.join {
			gr.out.Join()
		}
		if b.filter {
			gr.filter = NewFilter(b.run.Limit / int64(len(b.groups)))
		}
		b.groups[g] = gr
	}
	b.ranges = slices.Grow(b.ranges[:0], n)[:n]
	b.hashes = slices.Grow(b.hashes[:0], n)[:n]
	var coded *array.Binary
	if b.coded {
		coded = rec.Column(b.keys[0]).(*array.Binary)
	}
	for i := range n {
		key := b.buf[:0]
		if coded != nil {
			key = coded.Value(i)
		} else if b.buf, err = AppendKey(b.buf[:0], rec, b.keys, i); err != nil {
			return err
		} else {
			key = b.buf
		}
		b.hashes[i] = uint64(Hash(key))
		b.ranges[i] = rangeOf(b.hashes[i])
	}
	if gr.filter != nil {
		gr.filter.addHashes(b.hashes)
	}
	return gr.out.Write(ctx, rec, b.ranges)
}

// finishGroup ends group g's spill files (made empty when it had no rows).
func (b *Batch) finishGroup(g int) error {
	if b.groups[g] == nil {
		dir, err := b.run.Dir()
		if err != nil {
			return err
		}
		b.groups[g] = &batchGroup{out: NewFanout(dir, b.schema), filter: Filter{0}}
	}
	return b.groups[g].out.Finish()
}

// Finish ends the batch: its live pass keeps what it holds; spill files are finished.
func (b *Batch) Finish() error {
	if b.live != nil {
		return nil
	}
	for ; b.cur < len(b.groups); b.cur++ {
		if err := b.finishGroup(b.cur); err != nil {
			return err
		}
	}
	return nil
}

// Filter is a filter of group g's keys (nil while the batch is held: every key).
func (b *Batch) Filter(g int) Filter {
	if b.live != nil || b.groups[g] == nil {
		return nil
	}
	return b.groups[g].filter
}

// Live is the live pass (nil once handed over).
func (b *Batch) Live() Holder { return b.live }

// Schema is the schema of the records set aside (nil: none yet).
func (b *Batch) Schema() *arrow.Schema { return b.schema }

// Limit is what the live pass may hold.
func (b *Batch) Limit() int64 { return b.run.Limit }
