package jobs

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/delta"
)

// Parallel encoding of an append. Parquet encoding costs several times what CSV parsing
// does and a DataWriter encodes on the goroutine that calls Write, so a large load is
// spread over several writers ("lanes"), each on its own goroutine with its own files.
// Batches go to the lanes in turn (batch i to lane i mod n), so which rows land in which
// file depends only on the input. Small loads use one lane: the same single file as a
// sequential writer.
const (
	// maxLanes bounds the lanes whatever the core count.
	maxLanes = 4
	// laneQueue is how many batches wait for each lane; with the batch being encoded it
	// bounds the decoded batches held per lane.
	laneQueue = 1
)

// laneSourceBytes is the source size per lane: a load below twice this has one lane. A
// variable so tests can lower it.
var laneSourceBytes int64 = 64 << 20

// ingestLanes is the number of lanes for a load of the given source bytes: one per core
// (at most maxLanes), fewer when the load is small.
func ingestLanes(sourceBytes int64) int {
	return int(max(1, min(int64(runtime.GOMAXPROCS(0)), maxLanes, sourceBytes/laneSourceBytes)))
}

// laneBatch is a batch on its way to a lane, with the file it came from (for errors).
type laneBatch struct {
	rec  arrow.RecordBatch
	file string
}

// lane is one DataWriter and the goroutine that feeds it.
type lane struct {
	w    *delta.DataWriter
	in   chan laneBatch
	adds []*delta.Add // set by the lane's goroutine when it ends; read after the wait
}

// parallelWriter hands batches to its lanes and collects their add actions. It owns the
// lanes' goroutines (an errgroup): close or abort stops them and waits for them. write,
// close and abort are called from one goroutine.
type parallelWriter struct {
	ctx    context.Context // ends with the first lane error (its cause) or abort
	cancel context.CancelFunc
	g      *errgroup.Group
	lanes  []*lane
	next   int
}

// newParallelWriter starts n lanes, each with a DataWriter of the snapshot's table and
// an equal share of opts.MaxMemory.
func newParallelWriter(ctx context.Context, snap *delta.Snapshot, n int, opts delta.WriteOptions) (*parallelWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	p := &parallelWriter{ctx: gctx, cancel: cancel, g: g}
	if opts.MaxMemory > 0 {
		opts.MaxMemory /= int64(n)
	}
	for range n {
		w, err := snap.NewDataWriter(opts)
		if err != nil {
			p.abort()
			return nil, err
		}
		l := &lane{w: w, in: make(chan laneBatch, laneQueue)}
		p.lanes = append(p.lanes, l)
		g.Go(func() error { return p.run(l) })
	}
	return p, nil
}

// run writes the lane's batches until its channel closes, then its files. It returns
// at the first error (ending p.ctx for the other lanes and the writer), aborting its
// files; the batches it leaves in its channel are released by close or abort.
func (p *parallelWriter) run(l *lane) (err error) {
	defer func() {
		// A panic fails the stage, as it would on the stage's own goroutine (the
		// executor recovers those), instead of ending the process.
		if r := recover(); r != nil {
			err = fmt.Errorf("data writer: panic: %v\n%s", r, debug.Stack())
		}
		if err != nil {
			func() {
				defer func() { _ = recover() }()
				l.w.Abort()
			}()
		}
	}()
	for b := range l.in {
		err := p.ctx.Err()
		if err == nil {
			if err = l.w.Write(p.ctx, b.rec); err != nil {
				err = fmt.Errorf("%s: %w", b.file, err)
			}
		}
		b.rec.Release()
		if err != nil {
			return err
		}
	}
	if err := p.ctx.Err(); err != nil {
		return err
	}
	adds, err := l.w.Close(p.ctx)
	if err != nil {
		return err
	}
	l.adds = adds
	return nil
}

// write queues rec (retained) for the next lane. A lane's error is returned by a later
// write or by close; it already names the file of the batch that failed.
func (p *parallelWriter) write(rec arrow.RecordBatch, file string) error {
	l := p.lanes[p.next]
	p.next = (p.next + 1) % len(p.lanes)
	rec.Retain()
	select {
	case l.in <- laneBatch{rec: rec, file: file}:
		return nil
	case <-p.ctx.Done():
		rec.Release()
		return context.Cause(p.ctx)
	}
}

// stop closes the lanes' channels, waits for their goroutines and releases the batches
// a lane that failed left behind; it returns the first lane error.
func (p *parallelWriter) stop() error {
	for _, l := range p.lanes {
		close(l.in)
	}
	err := p.g.Wait()
	for _, l := range p.lanes {
		for b := range l.in {
			b.rec.Release()
		}
	}
	p.cancel()
	return err
}

// close finishes every lane's files and returns their add actions, lane by lane.
func (p *parallelWriter) close() ([]*delta.Add, error) {
	if err := p.stop(); err != nil {
		return nil, err
	}
	var adds []*delta.Add
	for _, l := range p.lanes {
		adds = append(adds, l.adds...)
	}
	return adds, nil
}

// abort stops the lanes, dropping what they have not uploaded.
func (p *parallelWriter) abort() {
	p.cancel()
	p.stop()
}
