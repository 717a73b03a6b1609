package dag

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// Jitter says how a backoff delay is randomised, so that many nodes failing together do
// not retry in lockstep.
type Jitter int

const (
	// NoJitter waits exactly the computed delay d.
	NoJitter Jitter = iota
	// FullJitter waits a uniformly random time in [0, d): the best spread, as recommended
	// in AWS's "Exponential Backoff And Jitter"; a retry may come at once.
	FullJitter
	// EqualJitter waits d/2 plus a uniformly random time in [0, d/2): always at least
	// half the delay.
	EqualJitter
)

// Backoff is the wait between a failed attempt and the next: Initial after the first
// failure, multiplied by Multiplier after each further one, capped at Max, then jittered.
// The zero value retries at once.
type Backoff struct {
	Initial    time.Duration // delay after the first failed attempt
	Multiplier float64       // growth per failed attempt; 0 means 2; otherwise at least 1
	Max        time.Duration // cap on the delay before jitter; 0 means no cap
	Jitter     Jitter
}

// Delay returns how long to wait after failed attempt number attempt (from 1) before the
// next one. rnd returns a number in [0, 1) and is used only for jitter; nil means
// math/rand/v2.Float64.
func (b Backoff) Delay(attempt int, rnd func() float64) time.Duration {
	if b.Initial <= 0 {
		return 0
	}
	mult := b.Multiplier
	if mult == 0 {
		mult = 2
	}
	ceiling := float64(math.MaxInt64)
	if b.Max > 0 {
		ceiling = float64(b.Max)
	}
	d := float64(b.Initial) * math.Pow(mult, float64(max(attempt, 1)-1))
	if !(d < ceiling) { // also catches +Inf and NaN
		d = ceiling
	}
	if b.Jitter == FullJitter || b.Jitter == EqualJitter {
		if rnd == nil {
			rnd = rand.Float64
		}
		r := rnd()
		if b.Jitter == FullJitter {
			d *= r
		} else {
			d = d/2 + d/2*r
		}
	}
	if !(d < float64(math.MaxInt64)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Permanent marks err as not worth retrying: the executor fails the node at once, however
// many retries it has left. The returned error has err's message and unwraps to it.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
