package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Faults are what a Proxy does to the connections it accepts from the moment they are
// set. The zero value forwards everything untouched.
type Faults struct {
	// Latency delays every chunk forwarded, both ways.
	Latency time.Duration
	// Reset closes each new connection at once with a TCP reset.
	Reset bool
	// CutAfter > 0 forwards only that many bytes of the server's answers on each
	// connection, then resets it: a response cut in the middle.
	CutAfter int64
	// StallAfter > 0 forwards only that many bytes of the server's answers on each
	// connection, then forwards nothing more but keeps the connection open: a response
	// that hangs in the middle.
	StallAfter int64
	// Hang accepts connections and reads requests but never forwards them nor answers.
	Hang bool
	// Times > 0 applies the faults to that many connections only; later ones are
	// forwarded untouched.
	Times int
}

// Proxy is a loopback TCP proxy in front of a server, whose faults a test controls.
type Proxy struct {
	l      net.Listener
	target string

	mu     sync.Mutex // guards the fields below
	faults Faults
	used   int // connections the faults were applied to
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards each connection to target
// (host:port). It is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Endpoint is the proxy's URL, http://127.0.0.1:port.
func (p *Proxy) Endpoint() string { return "http://" + p.l.Addr().String() }

// Set replaces the faults and drops every open connection, so that clients holding
// idle ones dial again and meet the new faults.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	p.faults, p.used = f, 0
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		f := p.faults
		if f.Times > 0 {
			if p.used >= f.Times {
				f = Faults{}
			}
			p.used++
		}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer p.forget(c)
			p.handle(c, f)
		}()
	}
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) handle(c net.Conn, f Faults) {
	switch {
	case f.Reset:
		reset(c)
		return
	case f.Hang:
		io.Copy(io.Discard, c) // until the client gives up or the proxy closes
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(c)
		return
	}
	p.mu.Lock()
	p.conns[s] = true
	p.mu.Unlock()
	defer p.forget(s)
	done := make(chan struct{}, 2)
	go func() { pipe(s, c, f.Latency, 0); s.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() {
		switch limit := max(f.CutAfter, f.StallAfter); {
		case !pipe(c, s, f.Latency, limit):
			c.(*net.TCPConn).CloseWrite()
		case f.StallAfter > 0:
			io.Copy(io.Discard, s) // swallow the rest until either side closes
		default:
			reset(c)
			s.Close()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// pipe copies src to dst, delaying each chunk by latency; with limit > 0 it stops after
// limit bytes and reports that it cut the stream.
func pipe(dst io.Writer, src io.Reader, latency time.Duration, limit int64) (cut bool) {
	buf := make([]byte, 32<<10)
	var sent int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if latency > 0 {
				time.Sleep(latency)
			}
			chunk := buf[:n]
			if limit > 0 && sent+int64(n) >= limit {
				chunk = chunk[:limit-sent]
				cut = true
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return cut
			}
			sent += int64(len(chunk))
			if cut {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
}
