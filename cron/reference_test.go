package cron

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// The planner's property: for random expressions in zones with every kind of clock change
// (an hour forward and back, half an hour on Lord Howe, two hours on Troll, at midnight in
// Santiago, Havana and Beirut, a whole day skipped in Apia in 2011), in windows around a
// change, the slots Next chains and Between lists are exactly those of a reference that
// reads the policy literally from a walk over every real minute (or second) of the window:
// an elapsed-time expression fires at each real instant whose local time matches; a
// fixed-time one fires once per matching local time, at its first instant, or, for a
// local time the clocks skipped, at the first instant after the jump over it.

// refField is a generated field: its text and the values it matches.
type refField struct {
	text string
	vals map[int]bool
}

func refRange(lo, hi, step int) map[int]bool {
	m := map[int]bool{}
	for v := lo; v <= hi; v += step {
		m[v] = true
	}
	return m
}

func refUnion(ms ...map[int]bool) map[int]bool {
	out := map[int]bool{}
	for _, m := range ms {
		for v := range m {
			out[v] = true
		}
	}
	return out
}

// refFields draws a field of [lo, hi] from the shapes cron allows: *, a value, a list, a
// range, a range with a step, */step, and ? where it may stand.
func refFieldOf(r *rand.Rand, lo, hi int, question bool) refField {
	v := func() int { return lo + r.IntN(hi-lo+1) }
	switch r.IntN(8) {
	case 0, 1:
		if question && r.IntN(2) == 0 {
			return refField{"?", refRange(lo, hi, 1)}
		}
		return refField{"*", refRange(lo, hi, 1)}
	case 2, 3:
		x := v()
		return refField{strconv.Itoa(x), map[int]bool{x: true}}
	case 4:
		a, b := v(), v()
		if a == b {
			return refField{strconv.Itoa(a), map[int]bool{a: true}}
		}
		return refField{fmt.Sprintf("%d,%d", a, b), map[int]bool{a: true, b: true}}
	case 5:
		a, b := v(), v()
		a, b = min(a, b), max(a, b)
		return refField{fmt.Sprintf("%d-%d", a, b), refRange(a, b, 1)}
	case 6:
		a, b := v(), v()
		a, b = min(a, b), max(a, b)
		s := 2 + r.IntN(4)
		return refField{fmt.Sprintf("%d-%d/%d", a, b, s), refRange(a, b, s)}
	}
	s := 2 + r.IntN(min(10, hi-lo))
	return refField{fmt.Sprintf("*/%d", s), refRange(lo, hi, s)}
}

// refExpr is a generated expression and its reference reading.
type refExpr struct {
	text                          string
	sec, min, hour, dom, mon, dow map[int]bool
	and                           bool // day-of-month AND day-of-week (one is * or ?)
	fixed                         bool
	seconds                       bool // a seconds field other than 0
}

func (e *refExpr) matches(w time.Time) bool {
	if !e.sec[w.Second()] || !e.min[w.Minute()] || !e.hour[w.Hour()] || !e.mon[int(w.Month())] {
		return false
	}
	dom, dow := e.dom[w.Day()], e.dow[int(w.Weekday())]
	if e.and {
		return dom && dow
	}
	return dom || dow
}

func genRefExpr(r *rand.Rand) refExpr {
	var e refExpr
	var parts []string
	// Hours and minutes near the clock changes are the interesting ones: half the time
	// the hour is drawn from 0-3.
	hour := refFieldOf(r, 0, 23, false)
	if r.IntN(2) == 0 {
		switch hour = refFieldOf(r, 0, 3, false); {
		case hour.text == "*":
			hour = refField{"0-3", refRange(0, 3, 1)}
		case strings.HasPrefix(hour.text, "*/"):
			step, _ := strconv.Atoi(hour.text[2:])
			hour = refField{fmt.Sprintf("0-3/%d", step), refRange(0, 3, step)}
		}
	}
	minute := refFieldOf(r, 0, 59, false)
	e.sec = map[int]bool{0: true}
	if r.IntN(6) == 0 {
		sec := refFieldOf(r, 0, 59, false)
		parts = append(parts, sec.text)
		e.sec, e.seconds = sec.vals, !(len(sec.vals) == 1 && sec.vals[0])
	}
	dom := refFieldOf(r, 1, 31, true)
	mon := refField{"*", refRange(1, 12, 1)}
	if r.IntN(4) == 0 {
		mon = refFieldOf(r, 1, 12, false)
	}
	dow := refField{"*", refRange(0, 6, 1)}
	if r.IntN(3) == 0 {
		dow = refFieldOf(r, 0, 6, true)
	}
	parts = append(parts, minute.text, hour.text, dom.text, mon.text, dow.text)
	e.text = strings.Join(parts, " ")
	e.min, e.hour, e.dom, e.mon, e.dow = minute.vals, hour.vals, dom.vals, mon.vals, dow.vals
	e.and = dom.text == "*" || dom.text == "?" || dow.text == "*" || dow.text == "?"
	wild := func(t string) bool { return strings.ContainsAny(t, "*?/") }
	e.fixed = !wild(minute.text) && !wild(hour.text)
	return e
}

// refZones are the zones of the property, each with a clock change to look at.
var refZones = []string{"America/Chicago", "Europe/Rome", "Australia/Lord_Howe", "Antarctica/Troll",
	"America/Santiago", "America/Havana", "Asia/Beirut", "Pacific/Chatham", "America/St_Johns",
	"Asia/Kathmandu", "UTC", "Pacific/Apia"}

// refWindow picks a window (from, to] of one to three days around change, one of loc's
// clock changes between 2015 and 2030 (Apia: its skipped 30 December 2011 half the time).
func refWindow(r *rand.Rand, name string, loc *time.Location) (from, to, change time.Time) {
	t := time.Date(2015+r.IntN(15), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, 0, time.UTC)
	if name == "Pacific/Apia" && r.IntN(2) == 0 {
		t = time.Date(2011, 12, 28, 0, 0, 0, 0, time.UTC)
	}
	if _, end := t.In(loc).ZoneBounds(); !end.IsZero() && end.Sub(t) < 400*24*time.Hour {
		t = end
	}
	from = t.Add(-time.Duration(12+r.IntN(48))*time.Hour - time.Duration(r.IntN(3600))*time.Second)
	return from, from.Add(time.Duration(24+r.IntN(48)) * time.Hour), t
}

// refSlots reads the policy over every real instant of the window (a day more each side,
// for the local times whose first instant or jump lies there) at step.
func refSlots(e *refExpr, loc *time.Location, from, to time.Time, step time.Duration) []time.Time {
	lo, hi := from.Add(-26*time.Hour).Truncate(step), to.Add(26*time.Hour)
	wall := func(t time.Time) time.Time { return wallOf(t, loc) }
	set := map[time.Time]bool{}
	if !e.fixed {
		for t := lo; !t.After(hi); t = t.Add(step) {
			if e.matches(wall(t)) {
				set[t] = true
			}
		}
	} else {
		first := map[time.Time]time.Time{} // local time -> its first instant
		for t := lo; !t.After(hi); t = t.Add(step) {
			if w := wall(t); e.matches(w) {
				if _, ok := first[w]; !ok {
					first[w] = t
				}
			}
		}
		for t := range first {
			set[first[t]] = true
		}
		// Local times the clocks jumped over: each at the instant after the jump.
		for t := lo.Add(step); !t.After(hi); t = t.Add(step) {
			a, b := wall(t.Add(-step)), wall(t)
			if b.Sub(a) <= step {
				continue
			}
			for w := a.Add(step); w.Before(b); w = w.Add(step) {
				if e.matches(w) {
					set[t] = true
				}
			}
		}
	}
	var out []time.Time
	for t := range set {
		if t.After(from) && !t.After(to) {
			out = append(out, t.UTC())
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func TestNextMatchesReference(t *testing.T) {
	cases := 1500
	if raceEnabled {
		cases = 300
	}
	r := rand.New(rand.NewPCG(testenv.PropertySeed(7), 0x5ced))
	var slots, fixed, seconds int
	for i := range cases {
		e := genRefExpr(r)
		name := refZones[r.IntN(len(refZones))]
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(e.text, loc)
		if err != nil {
			if strings.Contains(err.Error(), "never fire") {
				continue // 0 0 30 2 *: refused, as it should be
			}
			t.Fatalf("case %d: Parse(%q): %v", i, e.text, err)
		}
		if s.FixedTime() != e.fixed {
			t.Fatalf("case %d: %q: FixedTime() = %v, want %v", i, e.text, s.FixedTime(), e.fixed)
		}
		from, to, change := refWindow(r, name, loc)
		step := time.Minute
		if e.seconds {
			// Seconds matter: every second, over a few hours around the change.
			from = change.Add(-time.Duration(r.IntN(3*3600)) * time.Second)
			to = change.Add(time.Duration(r.IntN(3*3600)) * time.Second)
			step = time.Second
		}
		want := refSlots(&e, loc, from, to, step)
		var got []time.Time
		for at := s.Next(from); !at.IsZero() && !at.After(to); at = s.Next(at) {
			got = append(got, at)
			if len(got) > len(want)+1 {
				break
			}
		}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("case %d: %q in %s over (%s, %s]: Next gives %d slots %s, the policy %d slots %s",
				i, e.text, name, from.Format(time.RFC3339), to.Format(time.RFC3339), len(got), refShow(got, loc), len(want), refShow(want, loc))
		}
		if between, _ := s.Between(from, to, 0); !slices.EqualFunc(between, want, time.Time.Equal) {
			t.Fatalf("case %d: %q in %s: Between gives %s, want %s", i, e.text, name, refShow(between, loc), refShow(want, loc))
		}
		slots += len(want)
		if e.fixed {
			fixed++
		}
		if e.seconds {
			seconds++
		}
	}
	t.Logf("%d expressions (%d fixed-time, %d with seconds), %d slots", cases, fixed, seconds, slots)
}

func refShow(ts []time.Time, loc *time.Location) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, t := range ts {
		if i == 8 {
			fmt.Fprintf(&b, " ... %d more", len(ts)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.UTC().Format("01-02T15:04:05Z") + "(" + t.In(loc).Format("15:04:05 MST") + ")")
	}
	b.WriteByte(']')
	return b.String()
}
