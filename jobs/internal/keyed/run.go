package keyed

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// Run is one run of a keyed stage: its budget (Limit, the bytes a pass may hold), its
// spill directory (made when first needed, removed by Close) and its progress hooks.
type Run struct {
	// Limit is what a pass may hold (WorkingSet of the stage's budget).
	Limit int64
	// SpillDir is where the run's spill directory is made ("": os.TempDir()).
	SpillDir string
	// OnPass is told of each pass over spill files begun (pass i of n); OnPart of each
	// part of a MERGE in parts merged.
	OnPass func(pass, passes int)
	OnPart func(parts int)
	dir    *Dir
}

// Dir is the run's spill directory, made on first use.
func (r *Run) Dir() (*Dir, error) {
	if r.dir == nil {
		d, err := NewDir(r.SpillDir, r.Limit)
		if err != nil {
			return nil, err
		}
		r.dir = d
	}
	return r.dir, nil
}

// Close removes the run's spill files.
func (r *Run) Close() {
	r.dir.Remove()
	r.dir = nil
}

// Pass is one pass of a run: the key hash ranges [Lo, Hi) of the batch (one of its
// groups) and of the target side. The live pass (in memory: every range) took the
// batch's records as they were read; a pass over spill files reads them back.
type Pass struct {
	Lo, Hi int
	// Live is the live pass's holder (nil: a pass over spill files).
	Live   Holder
	group  *batchGroup
	target *Target
	// N is the pass's number (1, 2, ...) of Of.
	N, Of int
}

// EachBatch calls fn with the batch's records of the pass's ranges, as they were added
// (a live pass has taken them already: nothing).
func (p *Pass) EachBatch(ctx context.Context, fn func(ctx context.Context, rec arrow.RecordBatch) error) error {
	if p.Live != nil {
		return nil
	}
	return Each(ctx, p.group.out.Parts(p.Lo, p.Hi), func(rec arrow.RecordBatch) error { return fn(ctx, rec) })
}

// EachTarget calls fn with the target side's records of the pass's ranges: the live
// scan, or its rows set aside.
func (p *Pass) EachTarget(ctx context.Context, fn func(TargetRecord) error) error {
	if p.target == nil {
		return nil
	}
	return p.target.Each(ctx, p.Lo, p.Hi, fn)
}

// TargetRows is the number of the target side's rows of the pass's ranges set aside
// (live: 0, unknown).
func (p *Pass) TargetRows() int64 {
	if p.target == nil || p.target.out == nil {
		return 0
	}
	var n int64
	for r := p.Lo; r < p.Hi; r++ {
		n += p.target.out.PartRows(r)
	}
	return n
}

// Target is the pass's target side (nil: none).
func (p *Pass) Target() *Target { return p.target }

// Cost is what the rows of some key ranges cost a pass: the batch's (bytes and rows set
// aside) and the target's.
type Cost func(batchBytes, batchRows, targetBytes, targetRows int64) int64

// Passes runs body on every pass over group g of the batch and target (nil: none): one
// live pass when the batch is held, else the target set aside (unless it is already)
// and as many passes over consecutive ranges as the budget asks (cost). It returns the
// number of passes.
func (b *Batch) Passes(ctx context.Context, g int, target *Target, cost Cost, body func(ctx context.Context, p *Pass) error) (int, error) {
	if b.live != nil {
		if target != nil && target.Spilled() {
			return 0, errors.New("internal error: a target set aside for a batch held in memory")
		}
		return 1, body(ctx, &Pass{Lo: 0, Hi: Ranges, Live: b.live, target: target, N: 1, Of: 1})
	}
	dir, err := b.run.Dir()
	if err != nil {
		return 0, err
	}
	gr := b.groups[g]
	if target != nil && !target.Spilled() {
		if err := target.Spill(ctx, dir, b.run.Limit, gr.filter); err != nil {
			return 0, err
		}
	}
	part := func(f *Fanout, p int) (int64, int64) {
		if f == nil {
			return 0, 0
		}
		return f.PartBytes(p), f.PartRows(p)
	}
	var tout *Fanout
	if target != nil {
		tout = target.out
	}
	// Two passes at once (a stage that allows it, with two cores) each hold half the
	// budget: the second core works one pass's ranges while the first works another's,
	// where one pass at a time leaves it idle most of the time.
	at := 1
	if b.twoAtOnce {
		at = min(2, runtime.GOMAXPROCS(0))
	}
	runs := Plan(func(p int) int64 {
		bb, br := part(gr.out, p)
		tb, tr := part(tout, p)
		return cost(bb, br, tb, tr)
	}, b.run.Limit/int64(at))
	// A pass that fails cancels the others with its error (the first one's is the
	// cause) before it gives its slot back: no pass begins after it.
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, at) // (a pass is told begun when it has one)
	var wg sync.WaitGroup
	for i, r := range runs {
		select {
		case slots <- struct{}{}:
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			break
		}
		if b.run.OnPass != nil {
			b.run.OnPass(i+1, len(runs))
		}
		wg.Go(func() {
			if err := body(pctx, &Pass{Lo: r[0], Hi: r[1], group: gr, target: target, N: i + 1, Of: len(runs)}); err != nil {
				cancel(err)
			}
			<-slots
		})
	}
	wg.Wait()
	if err := context.Cause(pctx); err != nil {
		return 0, err
	}
	return len(runs), nil
}

// Sink makes the sink of the run's MERGE: direct when the batch is held (one pass),
// parted over spill files otherwise.
func (b *Batch) Sink(o SinkOptions) (*Sink, error) {
	o.Parted = b.live == nil
	if o.Parted {
		dir, err := b.run.Dir()
		if err != nil {
			return nil, err
		}
		// A part holds its rows three times over while the MERGE writes (read back,
		// merged in order, gathered) besides the MERGE's own buffers: a sixteenth
		// keeps the whole within the soft memory limit, where a quarter made the
		// collector run back to back.
		o.Dir, o.Limit = dir, b.run.Limit/16
	}
	o.OnPart = b.run.OnPart
	return NewSink(o)
}
