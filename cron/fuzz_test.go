package cron

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// fuzzAllocLimit bounds what one input may allocate (testenv.MaxAlloc).
const fuzzAllocLimit = 64 << 20

// FuzzSchedule parses an expression read in a time zone, as a pipeline's schedule and
// timezone keys are, and plans a few slots after an instant. Whatever the input: no
// panic, no unbounded work; a refused zone or expression is an error that says what it
// is about; a parsed schedule plans strictly increasing whole-second slots in UTC, the
// same ones every time, and Between agrees with Next.
func FuzzSchedule(f *testing.F) {
	seeds := []struct {
		expr, zone string
		after      int64
	}{
		{"30 2 * * *", "America/Chicago", 1709985600},       // 2024-03-09T12:00Z: the skipped hour
		{"30 1 * * *", "America/Chicago", 1730548800},       // 2024-11-02T12:00Z: the repeated hour
		{"*/15 * * * *", "Europe/Rome", 1774744800},         // 2026-03-29
		{"0 0,30 2 * * *", "America/Chicago", 1709985600},   // seconds field
		{"@every 10s", "UTC", 0},                            // elapsed time
		{"@daily", "Australia/Lord_Howe", 1712400000},       // a 30-minute DST shift
		{"0 0 29 2 *", "UTC", 4102444800},                   // 2100: no 29 February for 4 years
		{"0 0 30 2 *", "UTC", 0},                            // never fires: refused
		{"TZ=UTC * * * * *", "UTC", 0},                      // a zone prefix: refused
		{"*/7 * * * *", "Asia/Kathmandu", 0},                // a step that does not divide
		{"0 12 * * MON-FRI", "Pacific/Chatham", 1000000000}, // +12:45
		{"@every 1h30m", "", -62135596800},                  // the anchor at year 1
		{"1-5/2 3,4 L * ?", "Nowhere/Else", 0},
	}
	for _, s := range seeds {
		f.Add(s.expr, s.zone, s.after)
	}
	f.Fuzz(func(t *testing.T, expr, zone string, after int64) {
		if len(expr) > 256 || len(zone) > 64 {
			return
		}
		// Instants a schedule can meet: years 1 to 9999.
		const minUnix, maxUnix = -62135596800, 253402300799
		if after < minUnix || after > maxUnix {
			return
		}
		testenv.MaxAlloc(t, fuzzAllocLimit, func() {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				return // pipelines reports the zone; nothing to plan
			}
			s, err := Parse(expr, loc)
			if err != nil {
				if strings.TrimSpace(err.Error()) == "" {
					t.Fatalf("Parse(%q) fails with an empty error", expr)
				}
				return
			}
			if s.String() != strings.TrimSpace(expr) {
				t.Fatalf("Parse(%q).String() = %q, want the expression as written", expr, s.String())
			}
			from := time.Unix(after, 0).UTC()
			if s.Every() > 0 {
				s = s.Anchored(from)
			}
			var slots []time.Time
			prev := from
			for range 4 {
				next := s.Next(prev)
				if next.IsZero() {
					break
				}
				if !next.After(prev) {
					t.Fatalf("%q in %s: Next(%s) = %s, not after it", expr, zone, prev, next)
				}
				if next.Nanosecond() != 0 || next.Location() != time.UTC {
					t.Fatalf("%q in %s: Next(%s) = %s, want a whole second in UTC", expr, zone, prev, next)
				}
				if again := s.Next(prev); !again.Equal(next) {
					t.Fatalf("%q in %s: Next(%s) gave %s, then %s", expr, zone, prev, next, again)
				}
				slots = append(slots, next)
				prev = next
			}
			if len(slots) == 0 {
				return
			}
			between, _ := s.Between(from, slots[len(slots)-1], 0)
			if len(between) != len(slots) {
				t.Fatalf("%q in %s: Between(%s, %s) = %v, Next gave %v", expr, zone, from, slots[len(slots)-1], between, slots)
			}
			for i := range slots {
				if !between[i].Equal(slots[i]) {
					t.Fatalf("%q in %s: Between gives %v, Next %v", expr, zone, between, slots)
				}
			}
		})
	})
}
