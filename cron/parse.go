package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// Parser is what this package needs of a cron parser: robfig/cron's Parser satisfies it.
// Only the fields of the *robfig.SpecSchedule it returns are read; its Next is not.
type Parser interface {
	Parse(spec string) (robfig.Schedule, error)
}

// parser reads 5 or 6 fields (a leading seconds field is optional) and descriptors.
var parser Parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// starBit is robfig's mark of a field written as * or ?.
const starBit = 1 << 63

// descriptors are the named schedules as the fields they stand for (with seconds), so
// that the DST policy sees @daily as fixed-time and @hourly as not.
var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// Schedule is a parsed expression in a time zone. It is immutable.
type Schedule struct {
	expr     string
	loc      *time.Location
	every    time.Duration // @every; 0 for a cron expression
	anchor   time.Time     // @every: slots are anchor + k*every, k ≥ 1
	f        fields
	fixed    bool
	warnings []string
}

// fields are the bit sets of a cron expression: bit n of minute is minute n, and so on.
type fields struct {
	second, minute, hour, dom, month, dow uint64
	// and: day-of-month and day-of-week must both match (one of them is *); otherwise
	// either does.
	and bool
}

// Parse parses expr (see the package doc) as read in loc (nil means UTC).
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	expr = strings.TrimSpace(expr)
	s := &Schedule{expr: expr, loc: loc}
	switch {
	case expr == "":
		return nil, errors.New("empty schedule")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, errors.New("a TZ= or CRON_TZ= prefix is not allowed: put the zone in the timezone key")
	case strings.HasPrefix(expr, "@every"):
		d, err := parseEvery(expr)
		if err != nil {
			return nil, err
		}
		s.every = d
		return s, nil
	}
	text := expr
	if strings.HasPrefix(expr, "@") {
		var ok bool
		if text, ok = descriptors[expr]; !ok {
			return nil, fmt.Errorf("unknown descriptor %q: expected @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>", expr)
		}
	}
	parsed, err := parser.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%v; expected 5 fields (minute hour day-of-month month day-of-week), 6 with a leading seconds field, or a descriptor such as @daily or @every 10m", err)
	}
	spec, ok := parsed.(*robfig.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unexpected schedule type %T", parsed)
	}
	s.f = fields{
		second: spec.Second &^ starBit, minute: spec.Minute &^ starBit, hour: spec.Hour &^ starBit,
		dom: spec.Dom &^ starBit, month: spec.Month &^ starBit, dow: spec.Dow &^ starBit,
		and: spec.Dom&starBit != 0 || spec.Dow&starBit != 0,
	}
	names := strings.Fields(text)
	if len(names) == 5 {
		names = append([]string{"0"}, names...)
	}
	s.fixed = !wild(names[1]) && !wild(names[2])
	if !s.f.canFire() {
		return nil, errors.New("it can never fire: no month of the year has such a day")
	}
	s.warnings = stepWarnings(names)
	return s, nil
}

// MustParse is Parse for expressions known to be valid (tests, constants); it panics
// on an error.
func MustParse(expr string, loc *time.Location) *Schedule {
	s, err := Parse(expr, loc)
	if err != nil {
		panic(fmt.Sprintf("cron.MustParse(%q): %v", expr, err))
	}
	return s
}

// wild reports whether a field has a wildcard or a step.
func wild(field string) bool { return strings.ContainsAny(field, "*?/") }

func parseEvery(expr string) (time.Duration, error) {
	arg := strings.TrimSpace(strings.TrimPrefix(expr, "@every"))
	d, err := time.ParseDuration(arg)
	switch {
	case arg == "":
		return 0, errors.New("@every needs a duration, e.g. @every 10s or @every 1h30m")
	case err != nil:
		return 0, fmt.Errorf("@every %q: expected a duration such as 10s, 15m or 1h30m", arg)
	case d < time.Second:
		return 0, fmt.Errorf("@every %s: the interval must be at least 1s", arg)
	case d%time.Second != 0:
		return 0, fmt.Errorf("@every %s: the interval must be whole seconds", arg)
	}
	return d, nil
}

// daysIn is the most days a month can have (February in a leap year: 29).
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// canFire reports whether some day of some year matches. Only a restricted
// day-of-month with a * day-of-week can miss every day (0 0 30 2 *); a restricted
// day-of-week always finds its weekday.
func (f fields) canFire() bool {
	if f.month == 0 {
		return false
	}
	if !f.and || f.dom == domAll {
		return true
	}
	for m := 1; m <= 12; m++ {
		if f.month&(1<<m) == 0 {
			continue
		}
		for d := 1; d <= daysIn[m]; d++ {
			if f.dom&(1<<d) != 0 {
				return true
			}
		}
	}
	return false
}

// domAll is every day of the month, 1 to 31.
const domAll = uint64(1<<32 - 2)

// field bounds, for step warnings: name, first value, count of values.
var bounds = []struct {
	name       string
	min, count int
	unit       string
}{
	{"second", 0, 60, "second"}, {"minute", 0, 60, "minute"}, {"hour", 0, 24, "hour"},
	{"day-of-month", 1, 31, "day"}, {"month", 1, 12, "month"}, {"day-of-week", 0, 7, "day"},
}

// stepWarnings names each step that does not divide its field's range, like */7 in
// minutes: the gap from the last value to the first of the next cycle is not the step.
func stepWarnings(names []string) []string {
	var out []string
	for i, field := range names {
		b := bounds[i]
		for _, part := range strings.Split(field, ",") {
			rng, stepText, ok := strings.Cut(part, "/")
			if !ok {
				continue
			}
			step, err := strconv.Atoi(stepText)
			if err != nil || step <= 1 {
				continue
			}
			start := b.min
			if rng != "*" && rng != "?" {
				if strings.Contains(rng, "-") {
					continue // an explicit range: the user chose where it ends
				}
				if start, err = strconv.Atoi(rng); err != nil {
					continue
				}
			}
			end := b.min + b.count - 1
			last := start + (end-start)/step*step
			gap := b.min + b.count - last + (start - b.min)
			if i == 3 { // day-of-month: months differ in length
				out = append(out, fmt.Sprintf("%s field %q: the step of %d restarts at day %d every month, so the gap across a month's end is not %d days", b.name, field, step, start, step))
				continue
			}
			if gap != step {
				out = append(out, fmt.Sprintf("%s field %q: %d does not divide %d, so after %d comes %d of the next cycle, %d %ss later, not %d", b.name, field, step, b.count, last, start, gap, b.unit, step))
			}
		}
	}
	return out
}

// String returns the expression as written.
func (s *Schedule) String() string { return s.expr }

// Location returns the zone the expression is read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Every returns the interval of an @every schedule, 0 for a cron expression.
func (s *Schedule) Every() time.Duration { return s.every }

// FixedTime reports whether the expression's minute and hour are both fixed (the DST
// policy moves or merges such slots; see the package doc).
func (s *Schedule) FixedTime() bool { return s.every == 0 && s.fixed }

// Warnings lists what about the expression may surprise (a step that does not divide
// its field); the expression is valid all the same.
func (s *Schedule) Warnings() []string { return s.warnings }

// Anchored returns the schedule with an @every schedule's anchor set: its slots are
// anchor + k*interval for k ≥ 1. Cron expressions ignore it. The anchor is kept to the
// second.
func (s *Schedule) Anchored(anchor time.Time) *Schedule {
	c := *s
	c.anchor = anchor.Truncate(time.Second)
	return &c
}

// Anchor returns the anchor of an @every schedule (zero until Anchored).
func (s *Schedule) Anchor() time.Time { return s.anchor }
