package keyed

import (
	"context"
	"errors"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// Ahead decodes the live scan of a target snapshot on a goroutine of its own before
// the run's Target exists (while the batch is read, so that the second core decodes
// the target's files meanwhile), holding at most a limit of bytes of decoded records;
// past it, it waits for the scan's reader (a read-ahead as deep as the limit). A Target
// whose spec has Ahead takes its records instead of scanning again: every row of every
// file, in the scan's order, with their places. A target scan pruned by a Filter, or
// set aside, does not use it (it is stopped). Stop ends it and frees what it holds.
type Ahead struct {
	snap   *delta.Snapshot
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []aheadRecord
	held    int64 // bytes in queue
	limit   int64
	err     error // the scan's error
	ended   bool  // the scan is done (or failed)
	stopped bool  // Stop was called
	taken   bool  // a Target reads it
}

// aheadRecord is a decoded record of the target with the place of its first row.
type aheadRecord struct {
	rec   arrow.RecordBatch
	file  string
	first int64
	bytes int64
}

// StartAhead starts decoding snap's files (the given columns; nil: all) ahead, holding
// at most limit bytes (at least one record).
func StartAhead(ctx context.Context, snap *delta.Snapshot, columns []string, limit int64) *Ahead {
	ctx, cancel := context.WithCancel(ctx)
	a := &Ahead{snap: snap, cancel: cancel, done: make(chan struct{}), limit: limit}
	a.cond = sync.NewCond(&a.mu)
	go a.read(ctx, columns)
	return a
}

// read is the goroutine's work: the scan, record after record, into the queue.
func (a *Ahead) read(ctx context.Context, columns []string) {
	defer close(a.done)
	err := func() error {
		sc, err := a.snap.Scan(ctx, delta.ScanOptions{Columns: columns, FilesOnly: true})
		if err != nil {
			return err
		}
		defer sc.Release()
		for sc.Next() {
			file, first, ok := sc.Position()
			if !ok {
				return errors.New("the scan of the target lost the positions of its rows")
			}
			rec := sc.RecordBatch()
			r := aheadRecord{rec: rec, file: file.Path, first: first, bytes: RecordBytes(rec)}
			a.mu.Lock()
			for a.held > 0 && a.held+r.bytes > a.limit && !a.stopped {
				a.cond.Wait()
			}
			if a.stopped {
				a.mu.Unlock()
				return nil
			}
			rec.Retain()
			a.queue = append(a.queue, r)
			a.held += r.bytes
			a.cond.Broadcast()
			a.mu.Unlock()
		}
		return sc.Err()
	}()
	a.mu.Lock()
	a.err, a.ended = err, true
	a.cond.Broadcast()
	a.mu.Unlock()
}

// next is the next record decoded (ok false: the scan ended; err: it failed).
func (a *Ahead) next(ctx context.Context) (r aheadRecord, ok bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.queue) == 0 && !a.ended && !a.stopped {
		if err := ctx.Err(); err != nil {
			return r, false, err
		}
		a.cond.Wait()
	}
	if a.stopped {
		return r, false, errors.New("internal error: a target read ahead after its stop")
	}
	if len(a.queue) == 0 {
		return r, false, a.err
	}
	r = a.queue[0]
	a.queue[0] = aheadRecord{}
	a.queue = a.queue[1:]
	a.held -= r.bytes
	a.cond.Broadcast()
	return r, true, nil
}

// take marks the Ahead as read by a Target (once).
func (a *Ahead) take(snap *delta.Snapshot) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.taken || a.stopped || snap != a.snap {
		return false
	}
	a.taken = true
	return true
}

// Stop ends the read ahead (waiting for its goroutine) and releases what it holds. It
// may be called more than once; nil does nothing.
func (a *Ahead) Stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.stopped = true
	a.cond.Broadcast()
	a.mu.Unlock()
	a.cancel()
	<-a.done
	a.mu.Lock()
	for _, r := range a.queue {
		r.rec.Release()
	}
	a.queue, a.held = nil, 0
	a.mu.Unlock()
}

// eachAhead is Target.Each's live scan from a read ahead.
func (t *Target) eachAhead(ctx context.Context, a *Ahead, fn func(TargetRecord) error) error {
	defer a.Stop()
	for {
		// (the read ahead's cond does not watch ctx: a cancelled run's scan ends with
		// an error, which wakes next)
		r, ok, err := a.next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		fi, known := t.fileIdx[r.file]
		if !known {
			r.rec.Release()
			return errors.New("internal error: a target read ahead of a file the snapshot does not have")
		}
		err = fn(TargetRecord{Rec: r.rec, file: fi, first: r.first})
		r.rec.Release()
		if err != nil {
			return err
		}
	}
}
