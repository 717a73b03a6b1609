package delta

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// changeLane writes a merger's change rows on a goroutine of its own, so that encoding
// the change data file overlaps encoding the data file. Rows are written in the order
// they are sent. One goroutine at a time sends (the merger's applier, then the merger
// for the inserts); stop waits for every row to be written.
type changeLane struct {
	w    *rewriter // its change data writer (w.cdc, w.cdcRows) is used by the lane only
	ch   chan changeBatch
	done chan struct{}

	mu  sync.Mutex // guards err
	err error      // the first failure; later batches are dropped
}

type changeBatch struct {
	rec arrow.RecordBatch
	typ string
}

func newChangeLane(ctx context.Context, w *rewriter) *changeLane {
	l := &changeLane{w: w, ch: make(chan changeBatch, 4), done: make(chan struct{})}
	go func() { // stopped by stop, which waits for it
		defer close(l.done)
		for b := range l.ch {
			if l.failed() == nil {
				if err := w.writeChanges(ctx, b.rec, b.typ); err != nil {
					l.mu.Lock()
					l.err = err
					l.mu.Unlock()
				}
			}
			b.rec.Release()
		}
	}()
	return l
}

func (l *changeLane) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// send queues rec (retained until written) as change rows of type typ; it returns the
// lane's failure, if a batch already failed.
func (l *changeLane) send(rec arrow.RecordBatch, typ string) error {
	if err := l.failed(); err != nil {
		return err
	}
	// (the lane's goroutine and the data writer's may be given the same arrays)
	arrowx.SettleNullCounts(rec.Columns())
	rec.Retain()
	l.ch <- changeBatch{rec, typ}
	return nil
}

// stop waits until every queued batch is written and returns the first failure.
func (l *changeLane) stop() error {
	close(l.ch)
	<-l.done
	return l.failed()
}

// startChanges starts the change lane of m.w when the change feed is on; its writes
// use ctx.
func (m *merger) startChanges(ctx context.Context) {
	m.lane, m.changeRowsSent = nil, 0
	if m.w.cdfOn() {
		m.lane = newChangeLane(ctx, m.w)
	}
}

// writeChanges records rows as change rows of type typ (a no-op with the change feed
// off), on the merger's change lane.
func (m *merger) writeChanges(rec arrow.RecordBatch, typ string) error {
	if m.lane == nil || rec == nil || rec.NumRows() == 0 {
		return nil
	}
	m.changeRowsSent += rec.NumRows()
	return m.lane.send(rec, typ)
}

// stopChanges waits for the change lane to finish (before the writers are finished or
// aborted).
func (m *merger) stopChanges() error {
	if m.lane == nil {
		return nil
	}
	err := m.lane.stop()
	m.lane = nil
	return err
}
