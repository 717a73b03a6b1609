package delta

import (
	"context"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// fileFanOut reads a scan's files on several goroutines (ScanOptions.ParallelFiles): a
// dispatcher starts a reader per file, at most GOMAXPROCS at once, and queues each file's
// channel in file order; the scanner takes the records of one file's channel, then the
// next file's. A file's reader runs at most two records ahead (one in its channel, one
// waiting to be sent), which bounds memory. The fan-out owns its goroutines: stop cancels
// them, releases every record left in the channels and waits for them.
type fileFanOut struct {
	cancel context.CancelFunc
	files  chan chan scanned // each file's records, in file order; closed by the dispatcher
	cur    chan scanned      // the file being taken; nil between files
	wg     sync.WaitGroup
}

// fanOut starts reading the scan's files from s.next on.
func (s *Scanner) fanOut() *fileFanOut {
	ctx, cancel := context.WithCancel(s.ctx)
	workers := max(1, runtime.GOMAXPROCS(0))
	p := &fileFanOut{cancel: cancel, files: make(chan chan scanned, workers)}
	slots := make(chan struct{}, workers) // one per file being read
	files := s.files[s.next:]
	s.next = len(s.files)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(p.files)
		for _, a := range files {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			ch := make(chan scanned, 1)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer func() { <-slots }()
				defer close(ch)
				s.readFile(ctx, a, ch)
			}()
			select {
			case p.files <- ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

// readFile sends the records of one file to ch: each with the stats its reading added,
// then a last message with the stats left (and the error, if any).
func (s *Scanner) readFile(ctx context.Context, a *Add, ch chan<- scanned) {
	send := func(r scanned) bool {
		select {
		case ch <- r:
			return true
		case <-ctx.Done():
			if r.rec != nil {
				r.rec.Release()
			}
			return false
		}
	}
	f, err := s.openFile(ctx, a)
	if err != nil {
		send(scanned{err: err, stats: f.stats})
		return
	}
	defer f.close()
	for {
		rec, at, err := f.read(ctx, s)
		st := f.stats
		f.stats = ScanStats{}
		if err != nil || rec == nil {
			send(scanned{err: err, stats: st})
			return
		}
		if !send(scanned{rec: rec, at: at, stats: st}) {
			return
		}
	}
}

// readParallel returns the next non-empty record of the fanned-out files, in file order,
// or nil at the end or at an error (s.err).
func (s *Scanner) readParallel() (arrow.RecordBatch, position) {
	p := s.par
	for s.err == nil && p != nil {
		if p.cur == nil {
			ch, ok := <-p.files
			if !ok {
				// The end, or a cancelled context (the dispatcher gave up).
				if err := s.ctx.Err(); err != nil {
					s.err = err
				}
				return nil, position{}
			}
			p.cur = ch
		}
		r, ok := <-p.cur
		if !ok {
			p.cur = nil
			continue
		}
		s.stats.add(r.stats)
		if r.err != nil {
			s.err = r.err
			return nil, position{}
		}
		if r.rec != nil {
			return r.rec, r.at
		}
	}
	return nil, position{}
}

// stop cancels the readers, releases the records they left and waits for them.
func (p *fileFanOut) stop() {
	p.cancel()
	drain := func(ch chan scanned) {
		for r := range ch {
			if r.rec != nil {
				r.rec.Release()
			}
		}
	}
	if p.cur != nil {
		drain(p.cur)
	}
	for ch := range p.files {
		drain(ch)
	}
	p.wg.Wait()
}
