package cron

import (
	"slices"
	"strings"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// dstCase is a row of the known answers: the slots after a time, in UTC.
type dstCase struct {
	zone, expr, after string
	want              []string
	robfigWrong       bool // robfig's own Next gives other slots (SCHEDULER.md)
}

// knownAnswers are the DST known answers of SCHEDULER.md, plus */15 on the same days.
var knownAnswers = []dstCase{
	{"America/Chicago", "30 2 * * *", "2024-03-09T12:00:00Z", []string{"2024-03-10T08:00:00Z", "2024-03-11T07:30:00Z"}, true},
	{"America/Chicago", "30 1 * * *", "2024-11-02T12:00:00Z", []string{"2024-11-03T06:30:00Z", "2024-11-04T07:30:00Z"}, true},
	{"America/Chicago", "0 * * * *", "2024-11-03T04:30:00Z", []string{"2024-11-03T05:00:00Z", "2024-11-03T06:00:00Z", "2024-11-03T07:00:00Z", "2024-11-03T08:00:00Z"}, false},
	{"America/Chicago", "0 * * * *", "2024-03-10T05:30:00Z", []string{"2024-03-10T06:00:00Z", "2024-03-10T07:00:00Z", "2024-03-10T08:00:00Z"}, false},
	{"Europe/Rome", "30 2 * * *", "2026-03-28T12:00:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}, true},
	{"Europe/Rome", "30 2 * * *", "2026-10-24T12:00:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}, true},
	// Elapsed time every 15 minutes: the repeated hour twice (01:00..01:45 CDT, then CST),
	// the skipped hour not at all.
	{"America/Chicago", "*/15 * * * *", "2024-11-03T05:50:00Z", []string{
		"2024-11-03T06:00:00Z", "2024-11-03T06:15:00Z", "2024-11-03T06:30:00Z", "2024-11-03T06:45:00Z",
		"2024-11-03T07:00:00Z", "2024-11-03T07:15:00Z", "2024-11-03T07:30:00Z", "2024-11-03T07:45:00Z",
		"2024-11-03T08:00:00Z"}, false},
	{"America/Chicago", "*/15 * * * *", "2024-03-10T07:40:00Z", []string{"2024-03-10T07:45:00Z", "2024-03-10T08:00:00Z", "2024-03-10T08:15:00Z"}, false},
	{"Europe/Rome", "*/15 * * * *", "2026-03-29T00:40:00Z", []string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"}, false},
	{"Europe/Rome", "*/15 * * * *", "2026-10-25T00:40:00Z", []string{"2026-10-25T00:45:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:15:00Z"}, false},
	{"Europe/Rome", "0 * * * *", "2026-10-24T23:30:00Z", []string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}, false},
	// Fixed-time with seconds and a list of minutes: both skipped times become one slot.
	{"America/Chicago", "0 0,30 2 * * *", "2024-03-09T12:00:00Z", []string{"2024-03-10T08:00:00Z", "2024-03-11T07:00:00Z", "2024-03-11T07:30:00Z"}, false},
	{"America/Chicago", "@daily", "2024-11-02T12:00:00Z", []string{"2024-11-03T05:00:00Z", "2024-11-04T06:00:00Z"}, false},
}

// TestDSTKnownAnswers checks SCHEDULER.md's table (and more rows of the same days) with
// no clock at all: Next is a function of its arguments.
func TestDSTKnownAnswers(t *testing.T) {
	for _, tc := range knownAnswers {
		t.Run(tc.zone+" "+tc.expr+" after "+tc.after, func(t *testing.T) {
			s, err := Parse(tc.expr, zone(t, tc.zone))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			after := utc(tc.after)
			for range tc.want {
				after = s.Next(after)
				got = append(got, after.Format(time.RFC3339))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("slots\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestRobfigNextIsWrongThere shows why the planner is ours: robfig/cron's own Next
// skips or doubles the rows SCHEDULER.md names.
func TestRobfigNextIsWrongThere(t *testing.T) {
	for _, tc := range knownAnswers {
		if !tc.robfigWrong {
			continue
		}
		sched, err := robfig.ParseStandard("CRON_TZ=" + tc.zone + " " + tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		after := utc(tc.after)
		for range tc.want {
			after = sched.Next(after)
			got = append(got, after.UTC().Format(time.RFC3339))
		}
		if slices.Equal(got, tc.want) {
			t.Errorf("%s %s: robfig's Next now gives the known answers %v; SCHEDULER.md says it does not", tc.zone, tc.expr, got)
		}
	}
}

func TestNextSlotAdjustments(t *testing.T) {
	chicago := zone(t, "America/Chicago")
	cases := []struct {
		expr, after string
		want        Adjustment
	}{
		{"30 2 * * *", "2024-03-09T12:00:00Z", AtTransition},
		{"30 1 * * *", "2024-11-02T12:00:00Z", FirstOccurrence},
		{"0 * * * *", "2024-11-03T06:30:00Z", Repeated},
		{"0 * * * *", "2024-11-03T05:30:00Z", Repeated},
		{"0 * * * *", "2024-11-03T08:30:00Z", AsWritten},
	}
	for _, tc := range cases {
		s := MustParse(tc.expr, chicago)
		if got := s.NextSlot(utc(tc.after)); got.Adjustment != tc.want {
			t.Errorf("%s after %s: %v adjustment %d, want %d (%s)", tc.expr, tc.after, got.Time, got.Adjustment, tc.want, got.Note(s))
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		expr     string
		fixed    bool
		every    time.Duration
		after    string
		next     string
		warnings int
	}{
		{"0 2 * * *", true, 0, "2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z", 0},
		{"15 0 2 * * *", true, 0, "2026-01-01T00:00:00Z", "2026-01-01T02:00:15Z", 0},
		{"*/10 * * * * *", false, 0, "2026-01-01T00:00:01Z", "2026-01-01T00:00:10Z", 0},
		{"*/7 * * * *", false, 0, "2026-01-01T00:56:00Z", "2026-01-01T01:00:00Z", 1},
		{"0 */5 * * *", false, 0, "2026-01-01T20:00:00Z", "2026-01-02T00:00:00Z", 1},
		{"0 0 29 2 *", true, 0, "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z", 0},
		{"0 0 13 * 5", true, 0, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", 0}, // 13th OR Friday
		{"0 0 * * 1", true, 0, "2026-01-01T00:00:00Z", "2026-01-05T00:00:00Z", 0},
		{"@hourly", false, 0, "2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z", 0},
		{"@weekly", true, 0, "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z", 0},
		{"@monthly", true, 0, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", 0},
		{"@yearly", true, 0, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", 0},
		{"@every 90s", false, 90 * time.Second, "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z", 0},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := Parse(tc.expr, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			if s.FixedTime() != tc.fixed || s.Every() != tc.every || len(s.Warnings()) != tc.warnings {
				t.Errorf("fixed %v every %v warnings %q; want %v %v %d", s.FixedTime(), s.Every(), s.Warnings(), tc.fixed, tc.every, tc.warnings)
			}
			s = s.Anchored(utc("2026-01-01T00:00:00Z"))
			if got := s.Next(utc(tc.after)).Format(time.RFC3339); got != tc.next {
				t.Errorf("next after %s: %s, want %s", tc.after, got, tc.next)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"TZ=UTC", "TZ= or CRON_TZ= prefix"},
		{"CRON_TZ=Europe/Rome 0 2 * * *", "TZ= or CRON_TZ= prefix"},
		{"0 0 30 2 *", "can never fire"},
		{"0 0 31 4,6,9,11 *", "can never fire"},
		{"@every 500ms", "at least 1s"},
		{"@every 1.5s", "whole seconds"},
		{"@every", "needs a duration"},
		{"@every soon", "expected a duration"},
		{"@fortnightly", "unknown descriptor"},
		{"61 * * * *", "above maximum"},
		{"* * * *", "expected 5 to 6 fields"},
		{"", "empty"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want an error containing %q", tc.expr, err, tc.want)
		}
	}
}

func TestStepWarning(t *testing.T) {
	s := MustParse("*/7 * * * *", time.UTC)
	want := `minute field "*/7": 7 does not divide 60, so after 56 comes 0 of the next cycle, 4 minutes later, not 7`
	if got := s.Warnings(); len(got) != 1 || got[0] != want {
		t.Errorf("warnings %q, want [%q]", got, want)
	}
	for _, expr := range []string{"*/15 * * * *", "0 */6 * * *", "5-50/7 * * * *", "*/1 * * * *"} {
		if w := MustParse(expr, time.UTC).Warnings(); len(w) != 0 {
			t.Errorf("%s: warnings %q, want none", expr, w)
		}
	}
}

// TestEveryAnchored: @every counts elapsed time from its anchor, across a clock change.
func TestEveryAnchored(t *testing.T) {
	s := MustParse("@every 1h", zone(t, "America/Chicago")).Anchored(utc("2024-11-03T05:20:00Z"))
	got, _ := s.Between(utc("2024-11-03T05:20:00Z"), utc("2024-11-03T08:20:00Z"), 0)
	want := []time.Time{utc("2024-11-03T06:20:00Z"), utc("2024-11-03T07:20:00Z"), utc("2024-11-03T08:20:00Z")}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("slots %v, want %v", got, want)
	}
	if n := s.Next(utc("2024-11-03T01:00:00Z")); !n.Equal(utc("2024-11-03T06:20:00Z")) {
		t.Errorf("next before the anchor: %v, want the first slot after it", n)
	}
}

func TestBetweenLimit(t *testing.T) {
	s := MustParse("* * * * * *", time.UTC)
	got, more := s.Between(utc("2026-01-01T00:00:00Z"), utc("2026-01-01T01:00:00Z"), 10)
	if len(got) != 10 || !more || !got[9].Equal(utc("2026-01-01T00:00:10Z")) {
		t.Errorf("got %d slots (last %v), more %v; want 10 ending 00:00:10 and more", len(got), got[len(got)-1], more)
	}
}
