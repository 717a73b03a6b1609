package scheduler

import (
	"context"
	"sync"
)

// Limiter bounds the stages running at once across every pipeline (serve --max-stages).
// Stages that wait are served fairly: pipelines take turns, each pipeline's stages in the
// order they asked, so one pipeline with many ready stages cannot starve the others.
type Limiter struct {
	mu     sync.Mutex // guards everything below
	free   int
	queues map[string][]chan struct{} // per pipeline, its waiters in order
	ring   []string                   // pipelines with waiters, in turn order
	next   int                        // position in ring of the pipeline served next
}

// NewLimiter allows n stages at once (n ≥ 1).
func NewLimiter(n int) *Limiter {
	return &Limiter{free: max(n, 1), queues: map[string][]chan struct{}{}}
}

// Acquire waits for a turn for a stage of pipeline, or until ctx is done; release gives
// the turn back.
func (l *Limiter) Acquire(ctx context.Context, pipeline string) (release func(), err error) {
	l.mu.Lock()
	if l.free > 0 && len(l.ring) == 0 {
		l.free--
		l.mu.Unlock()
		return l.release, nil
	}
	ch := make(chan struct{})
	if len(l.queues[pipeline]) == 0 {
		l.ring = append(l.ring, pipeline)
	}
	l.queues[pipeline] = append(l.queues[pipeline], ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return l.release, nil
	case <-ctx.Done():
		l.mu.Lock()
		granted := false
		select {
		case <-ch:
			granted = true
		default:
			l.remove(pipeline, ch)
		}
		l.mu.Unlock()
		if granted { // the turn came as ctx ended: pass it on
			l.release()
		}
		return nil, context.Cause(ctx)
	}
}

// release hands the turn to the next pipeline's first waiter, or frees it.
func (l *Limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) == 0 {
		l.free++
		return
	}
	l.next %= len(l.ring)
	p := l.ring[l.next]
	q := l.queues[p]
	close(q[0])
	l.queues[p] = q[1:]
	if len(l.queues[p]) == 0 {
		delete(l.queues, p)
		l.ring = append(l.ring[:l.next], l.ring[l.next+1:]...)
	} else {
		l.next++
	}
}

// remove drops a waiter that gave up (l.mu held).
func (l *Limiter) remove(pipeline string, ch chan struct{}) {
	q := l.queues[pipeline]
	for i, c := range q {
		if c == ch {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		l.queues[pipeline] = q
		return
	}
	delete(l.queues, pipeline)
	for i, p := range l.ring {
		if p == pipeline {
			l.ring = append(l.ring[:i], l.ring[i+1:]...)
			if l.next > i {
				l.next--
			}
			break
		}
	}
}
