package lease

import (
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"syscall"
	"time"
)

// Identity names a process that holds leases (and heartbeats runs).
type Identity struct {
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Instance string `json:"instance"` // random, one per holder within a process
}

// Local is this process's identity, with a fresh instance name.
func Local() Identity {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return Identity{Host: host, PID: os.Getpid(), Instance: strings.ToLower(rand.Text()[:10])}
}

// ProcessAlive reports whether process pid of this host runs (signal 0); the host is
// the caller's own.
func ProcessAlive(_ string, pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Gone reports whether holder is a process of the observer's host, other than the
// observer's, that no longer runs (alive nil: ProcessAlive). A holder on another host is
// never known gone: its lease goes stale by Watch alone.
func Gone(holder, observer Identity, alive func(host string, pid int) bool) bool {
	if alive == nil {
		alive = ProcessAlive
	}
	return holder.Host == observer.Host && holder.PID > 0 && holder.PID != observer.PID && !alive(holder.Host, holder.PID)
}

// Duration is a time.Duration that reads and writes as text ("15s") in JSON.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Watch is one observer's view of a lease it does not hold: the newest generation and
// renewal count it saw, and since when by its own clock. The zero Watch has seen
// nothing. A Watch is not safe for concurrent use.
type Watch struct {
	gen, seq int64
	since    time.Time
	seen     bool
}

// Stale records that the lease's newest generation gen with renewal count seq was seen
// at now (the observer's clock) and reports whether that pair has stayed the same for
// ttl since the observer first saw it. A lease seen for the first time is never stale:
// a newly started observer waits a whole TTL before it takes a silent lease over.
func (w *Watch) Stale(gen, seq int64, ttl time.Duration, now time.Time) bool {
	if !w.seen || gen != w.gen || seq != w.seq {
		w.gen, w.seq, w.since, w.seen = gen, seq, now, true
		return false
	}
	return now.Sub(w.since) >= ttl
}

// Since is when, by the observer's clock, the current generation and renewal count were
// first seen (zero: nothing seen).
func (w *Watch) Since() time.Time { return w.since }
