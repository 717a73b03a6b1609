package dag

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func constRand(r float64) func() float64 { return func() float64 { return r } }

func TestBackoffDelay(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name string
		b    Backoff
		rnd  func() float64
		want []time.Duration // for attempts 1, 2, 3, ...
	}{
		{"zero value retries at once", Backoff{}, nil, []time.Duration{0, 0, 0}},
		{"doubles by default", Backoff{Initial: s}, nil, []time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{"multiplier", Backoff{Initial: s, Multiplier: 3}, nil, []time.Duration{s, 3 * s, 9 * s}},
		{"multiplier 1 is constant", Backoff{Initial: s, Multiplier: 1}, nil, []time.Duration{s, s, s}},
		{"capped at max", Backoff{Initial: s, Max: 5 * s}, nil, []time.Duration{s, 2 * s, 4 * s, 5 * s, 5 * s}},
		{"full jitter scales by rand", Backoff{Initial: s, Jitter: FullJitter}, constRand(0.25),
			[]time.Duration{s / 4, s / 2, s}},
		{"full jitter may be zero", Backoff{Initial: s, Jitter: FullJitter}, constRand(0), []time.Duration{0, 0}},
		{"equal jitter keeps half", Backoff{Initial: s, Jitter: EqualJitter}, constRand(0), []time.Duration{s / 2, s, 2 * s}},
		{"equal jitter adds rand of half", Backoff{Initial: s, Jitter: EqualJitter}, constRand(0.5),
			[]time.Duration{750 * time.Millisecond, 1500 * time.Millisecond}},
		{"jitter applies after the cap", Backoff{Initial: s, Max: 2 * s, Jitter: FullJitter}, constRand(0.5),
			[]time.Duration{s / 2, s, s, s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for attempt := 1; attempt <= len(tt.want); attempt++ {
				got = append(got, tt.b.Delay(attempt, tt.rnd))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffDelayDoesNotOverflow(t *testing.T) {
	b := Backoff{Initial: time.Hour, Multiplier: 10}
	if got := b.Delay(1000, nil); got != time.Duration(math.MaxInt64) {
		t.Errorf("Delay(1000) = %v, want the largest Duration", got)
	}
	b.Max = 10 * time.Minute
	if got := b.Delay(1000, nil); got != 10*time.Minute {
		t.Errorf("Delay(1000) with Max = %v, want 10m", got)
	}
}

func TestBackoffDefaultRandStaysInRange(t *testing.T) {
	b := Backoff{Initial: time.Second, Jitter: EqualJitter}
	for range 1000 {
		if got := b.Delay(1, nil); got < 500*time.Millisecond || got >= time.Second {
			t.Fatalf("Delay(1) = %v, want in [500ms, 1s)", got)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad credentials")
	tests := []struct {
		name          string
		err           error
		wantPermanent bool
	}{
		{"plain", base, false},
		{"marked", Permanent(base), true},
		{"marked then wrapped", fmt.Errorf("stage load: %w", Permanent(base)), true},
		{"joined", errors.Join(errors.New("other"), Permanent(base)), true},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.wantPermanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.wantPermanent)
			}
		})
	}
	if err := Permanent(base); err.Error() != base.Error() || !errors.Is(err, base) {
		t.Errorf("Permanent(err) = %q (Is base: %v), want the same message and Is base", err, errors.Is(err, base))
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
}
