package cron

import (
	"fmt"
	"time"
)

// horizon bounds the search for a slot: every valid expression fires within it (a
// 29 February fires at least every 8 years).
const horizon = 9 * 366 * 24 * time.Hour

// foldMargin is how far before after's local time a fixed-time search starts, so that
// a wall time that a clock change moved across after is still seen (clock changes are
// at most 2 hours).
const foldMargin = 3 * time.Hour

// Adjustment says how the DST policy placed a slot.
type Adjustment int

const (
	// AsWritten: the slot is at its local time, which occurs once.
	AsWritten Adjustment = iota
	// AtTransition: a fixed-time slot whose local time was skipped by a spring-forward
	// change, moved to the transition instant.
	AtTransition
	// FirstOccurrence: a fixed-time slot whose local time occurs twice (fall-back), at
	// the first of the two.
	FirstOccurrence
	// Repeated: an elapsed-time slot in a repeated hour, at its first or second
	// occurrence: both fire.
	Repeated
)

// Slot is one firing of a schedule.
type Slot struct {
	Time       time.Time // in UTC
	Adjustment Adjustment
	// Wall is the local time the expression named, for AtTransition (which runs at
	// another local time).
	Wall time.Time
}

// Note explains a slot's Adjustment in words ("" for AsWritten).
func (sl Slot) Note(s *Schedule) string {
	local := sl.Time.In(s.loc)
	switch sl.Adjustment {
	case AtTransition:
		return fmt.Sprintf("%s does not exist on %s (clocks go forward): runs once, at the transition", sl.Wall.Format("15:04:05"), sl.Wall.Format(time.DateOnly))
	case FirstOccurrence:
		return fmt.Sprintf("%s occurs twice (clocks go back): runs once, at the first", local.Format("15:04:05"))
	case Repeated:
		return fmt.Sprintf("repeated hour (clocks go back): %s %s", local.Format("15:04:05"), local.Format("MST"))
	}
	return ""
}

// Next returns the first slot strictly after after, or the zero time when there is none
// (an @every schedule whose anchor is later than the horizon cannot happen; a valid
// cron expression always has one).
func (s *Schedule) Next(after time.Time) time.Time { return s.NextSlot(after).Time }

// NextSlot is Next with how the DST policy placed the slot.
func (s *Schedule) NextSlot(after time.Time) Slot {
	switch {
	case s.every > 0:
		return Slot{Time: s.nextEvery(after)}
	case s.fixed:
		return s.nextFixed(after)
	default:
		return s.nextElapsed(after)
	}
}

// Between returns the slots in (from, to], in order, at most max of them (max ≤ 0: no
// limit), and whether there were more.
func (s *Schedule) Between(from, to time.Time, max int) ([]time.Time, bool) {
	var out []time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		if max > 0 && len(out) == max {
			return out, true
		}
		out = append(out, t)
	}
	return out, false
}

func (s *Schedule) nextEvery(after time.Time) time.Time {
	anchor := s.anchor
	if anchor.IsZero() {
		anchor = time.Unix(0, 0)
	}
	k := int64(1)
	if after.After(anchor) {
		k = int64(after.Sub(anchor)/s.every) + 1
	}
	return anchor.Add(time.Duration(k) * s.every).UTC()
}

// ceilSecond is the first whole second strictly after t.
func ceilSecond(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second)
}

// wallOf is t's local clock reading in loc, as a UTC time (a "wall time").
func wallOf(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	return time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC)
}

// nextElapsed: every real instant whose local time matches. Within one zone period the
// offset is fixed, so the search is one of wall times; a match past the period's end is
// not real, and the search goes on from the next period.
func (s *Schedule) nextElapsed(after time.Time) Slot {
	t := ceilSecond(after).UTC()
	limit := t.Add(horizon)
	for t.Before(limit) {
		lt := t.In(s.loc)
		_, off := lt.Zone()
		_, end := lt.ZoneBounds()
		offset := time.Duration(off) * time.Second
		wallLimit := limit.Add(offset)
		if !end.IsZero() {
			wallLimit = end.Add(offset)
		}
		w, ok := s.f.nextWall(wallOf(t, s.loc), wallLimit)
		if ok {
			cand := w.Add(-offset)
			if end.IsZero() || cand.Before(end) {
				return Slot{Time: cand, Adjustment: s.repeated(cand)}
			}
		}
		if end.IsZero() {
			break
		}
		t = end.UTC()
	}
	return Slot{}
}

// repeated reports Repeated when t's local time also occurs at another instant.
func (s *Schedule) repeated(t time.Time) Adjustment {
	if _, n := instantsOf(wallOf(t, s.loc), s.loc); n > 1 {
		return Repeated
	}
	return AsWritten
}

// nextFixed: every matching wall time, placed by the policy (instantOf), in wall time
// order; the placement never goes backwards as wall time goes forwards, so the first
// placed strictly after after is the slot.
func (s *Schedule) nextFixed(after time.Time) Slot {
	w := wallOf(after, s.loc).Add(-foldMargin)
	limit := w.Add(horizon)
	for {
		var ok bool
		if w, ok = s.f.nextWall(w, limit); !ok {
			return Slot{}
		}
		if sl := placeFixed(w, s.loc); sl.Time.After(after) {
			return sl
		}
		w = w.Add(time.Second)
	}
}

// placeFixed applies the fixed-time policy to a wall time: its instant if it has one,
// the first if it has two, the transition instant if it has none.
func placeFixed(w time.Time, loc *time.Location) Slot {
	first, n := instantsOf(w, loc)
	switch n {
	case 1:
		return Slot{Time: first}
	case 2:
		return Slot{Time: first, Adjustment: FirstOccurrence}
	}
	// A skipped wall time: reading it with the offset before the change lands after the
	// change; the zone period it lands in starts at the transition.
	before := offsetAt(w.Add(-24*time.Hour), loc)
	after := offsetAt(w.Add(24*time.Hour), loc)
	late := w.Add(-min(before, after))
	start, _ := late.In(loc).ZoneBounds()
	return Slot{Time: start.UTC(), Adjustment: AtTransition, Wall: w}
}

// offsetAt is the zone offset in loc at the instant t.
func offsetAt(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}

// instantsOf returns the first instant whose local time in loc is the wall time w, and
// how many there are (0 in a skipped hour, 2 in a repeated one).
func instantsOf(w time.Time, loc *time.Location) (time.Time, int) {
	var first time.Time
	n := 0
	seen := map[time.Duration]bool{}
	for _, probe := range []time.Duration{-24 * time.Hour, 0, 24 * time.Hour} {
		off := offsetAt(w.Add(probe), loc)
		if seen[off] {
			continue
		}
		seen[off] = true
		t := w.Add(-off)
		if !wallOf(t, loc).Equal(w) {
			continue
		}
		if n == 0 || t.Before(first) {
			first = t
		}
		n++
	}
	return first.UTC(), n
}

// nextWall returns the first wall time at or after w (a whole second, UTC) that the
// fields match, if there is one not after limit.
func (f *fields) nextWall(w, limit time.Time) (time.Time, bool) {
	for !w.After(limit) {
		switch {
		case f.month&(1<<uint(w.Month())) == 0:
			w = time.Date(w.Year(), w.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !f.dayMatches(w):
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
		case f.hour&(1<<uint(w.Hour())) == 0:
			w = w.Truncate(time.Hour).Add(time.Hour)
		case f.minute&(1<<uint(w.Minute())) == 0:
			w = w.Truncate(time.Minute).Add(time.Minute)
		case f.second&(1<<uint(w.Second())) == 0:
			w = w.Add(time.Second)
		default:
			return w, true
		}
	}
	return time.Time{}, false
}

func (f *fields) dayMatches(w time.Time) bool {
	dom := f.dom&(1<<uint(w.Day())) != 0
	dow := f.dow&(1<<uint(w.Weekday())) != 0
	if f.and {
		return dom && dow
	}
	return dom || dow
}
