package decode

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// pipeline parses CSV chunks on several goroutines and hands the batches out in file
// order. Goroutines: one splitter (reads and cuts), n parsers; all are owned by the
// pipeline, stopped by close, which waits for them. At most n+2 chunks are in flight
// (read, being parsed, or parsed and waiting for their turn), which bounds memory.
type pipeline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	src     *csvSource
	tokens  chan struct{} // one per chunk in flight; the splitter takes, next gives back
	work    chan chunk
	results chan result
	waiting map[int]result // parsed, not yet handed out; owned by next's goroutine
	nextSeq int
	wg      sync.WaitGroup
	closed  bool
}

type result struct {
	seq int
	rec arrow.RecordBatch
	bad []*Error
	err error
	end bool
}

func newPipeline(ctx context.Context, s *csvSource, n int) *pipeline {
	ctx, cancel := context.WithCancel(ctx)
	p := &pipeline{ctx: ctx, cancel: cancel, src: s,
		tokens:  make(chan struct{}, n+2),
		work:    make(chan chunk, n+2),
		results: make(chan result, n+3),
		waiting: map[int]result{}}
	p.wg.Add(1)
	go p.splitLoop()
	for range n {
		parser, err := s.newParser()
		p.wg.Add(1)
		go p.parseLoop(parser, err)
	}
	return p
}

func (p *pipeline) splitLoop() {
	defer p.wg.Done()
	defer close(p.work)
	for {
		select {
		case p.tokens <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		c, err := p.src.split.next()
		if err != nil || len(c.data) == 0 {
			r := result{seq: c.seq, end: true}
			if err != nil {
				r.err = p.src.splitError(err)
			}
			select {
			case p.results <- r:
			case <-p.ctx.Done():
			}
			return
		}
		select {
		case p.work <- c:
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *pipeline) parseLoop(parser *csvParser, perr error) {
	defer p.wg.Done()
	for c := range p.work {
		var r result
		if perr != nil {
			r = result{seq: c.seq, err: perr}
		} else {
			rec, bad, err := parser.parseChunk(c)
			r = result{seq: c.seq, rec: rec, bad: bad, err: err}
		}
		p.src.split.recycle(c.buf)
		select {
		case p.results <- r:
		case <-p.ctx.Done():
			if r.rec != nil {
				r.rec.Release()
			}
			return
		}
	}
}

func (p *pipeline) next() (arrow.RecordBatch, []*Error, error) {
	for {
		if r, ok := p.waiting[p.nextSeq]; ok {
			delete(p.waiting, p.nextSeq)
			p.nextSeq++
			if r.end {
				return nil, nil, r.err
			}
			<-p.tokens
			return r.rec, r.bad, r.err
		}
		select {
		case r := <-p.results:
			p.waiting[r.seq] = r
		case <-p.ctx.Done():
			return nil, nil, p.ctx.Err()
		}
	}
}

// close stops the goroutines, waits for them, and frees the batches not handed out.
func (p *pipeline) close() {
	if p.closed {
		return
	}
	p.closed = true
	p.cancel()
	p.wg.Wait()
	for {
		select {
		case r := <-p.results:
			p.waiting[r.seq] = r
			continue
		default:
		}
		break
	}
	for _, r := range p.waiting {
		if r.rec != nil {
			r.rec.Release()
		}
	}
	p.waiting = nil
}
