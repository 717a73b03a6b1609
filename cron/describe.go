package cron

import (
	"fmt"
	"strings"
	"time"
)

// Describe says in words when the schedule fires, in its zone's wall time ("at 02:00
// every day", "every 15 minutes on weekdays"), as the pages show next to the
// expression. An expression too irregular for a short sentence is described field by
// field.
func (s *Schedule) Describe() string {
	if s.every > 0 {
		return "every " + durationWords(s.every)
	}
	text := s.expr
	if d, ok := descriptors[text]; ok {
		text = d
	}
	names := strings.Fields(text)
	if len(names) == 5 {
		names = append([]string{"0"}, names...)
	}
	if len(names) != 6 {
		return s.expr
	}
	star := func(f string) bool { return f == "*" || f == "?" }
	days := dayWords(s.f, star(names[3]), star(names[5]))
	if !star(names[4]) {
		days += " in " + listWords(bitList(s.f.month, 1, 12), func(m int) string { return time.Month(m).String() })
	}
	t := timeWords(s.f)
	if days == "every day" && strings.HasPrefix(t, "every ") {
		return t
	}
	return t + " " + days
}

func timeWords(f fields) string {
	secs, mins, hours := bitList(f.second, 0, 59), bitList(f.minute, 0, 59), bitList(f.hour, 0, 23)
	sec := ""
	if len(secs) != 1 || secs[0] != 0 {
		sec = " at second " + listWords(secs, itoa)
		if len(secs) == 60 {
			sec = " every second"
		}
	}
	allHours := len(hours) == 24
	switch {
	case len(hours)*len(mins) <= 4:
		var at []string
		for _, h := range hours {
			for _, m := range mins {
				if len(secs) == 1 && secs[0] != 0 {
					at = append(at, fmt.Sprintf("%02d:%02d:%02d", h, m, secs[0]))
				} else {
					at = append(at, fmt.Sprintf("%02d:%02d", h, m))
				}
			}
		}
		if len(secs) == 1 {
			sec = ""
		}
		return "at " + joinWords(at) + sec
	case allHours && len(mins) == 60:
		if sec != "" {
			return "every minute" + sec
		}
		return "every minute"
	case allHours && evenStep(mins, 60) > 1:
		return fmt.Sprintf("every %d minutes", evenStep(mins, 60)) + sec
	case allHours && len(mins) == 1 && mins[0] == 0:
		return "every hour, on the hour" + sec
	case allHours:
		return "every hour at minute " + listWords(mins, itoa) + sec
	case len(mins) == 1 && contiguous(hours):
		return fmt.Sprintf("every hour from %02d:%02d to %02d:%02d", hours[0], mins[0], hours[len(hours)-1], mins[0]) + sec
	}
	return "at minute " + listWords(mins, itoa) + " of hour " + listWords(hours, itoa) + sec
}

func dayWords(f fields, domStar, dowStar bool) string {
	weekday := func(d int) string { return time.Weekday(d).String() }
	dows := bitList(f.dow, 0, 6)
	onDays := func() string {
		switch {
		case equalInts(dows, []int{1, 2, 3, 4, 5}):
			return "on weekdays"
		case equalInts(dows, []int{0, 6}):
			return "on weekends"
		}
		return "on " + listWords(dows, weekday)
	}
	doms := "on day " + listWords(bitList(f.dom, 1, 31), itoa) + " of the month"
	switch {
	case domStar && dowStar:
		return "every day"
	case dowStar:
		return doms
	case domStar:
		return onDays()
	}
	return doms + " and " + onDays()
}

// bitList lists the set bits of b from lo to hi.
func bitList(b uint64, lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		if b&(1<<uint(i)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// evenStep returns n when vals are 0, n, 2n, ... covering a field of size (n divides
// it), else 0.
func evenStep(vals []int, size int) int {
	if len(vals) < 2 || vals[0] != 0 {
		return 0
	}
	n := vals[1]
	if size%n != 0 || len(vals) != size/n {
		return 0
	}
	for i, v := range vals {
		if v != i*n {
			return 0
		}
	}
	return n
}

func contiguous(vals []int) bool {
	for i := 1; i < len(vals); i++ {
		if vals[i] != vals[i-1]+1 {
			return false
		}
	}
	return len(vals) > 1
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// listWords joins values ("1, 15 and 28"), a run of three or more as a range ("9–17").
func listWords(vals []int, name func(int) string) string {
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		for j+1 < len(vals) && vals[j+1] == vals[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, name(vals[i])+" to "+name(vals[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, name(vals[k]))
			}
		}
		i = j + 1
	}
	return joinWords(parts)
}

func joinWords(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func itoa(i int) string { return fmt.Sprint(i) }

// durationWords says an @every interval: "10 minutes", "1 hour 30 minutes", "45 seconds".
func durationWords(d time.Duration) string {
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if n := d / u.d; n > 0 {
			if n == 1 {
				parts = append(parts, "1 "+u.name)
			} else {
				parts = append(parts, fmt.Sprintf("%d %ss", n, u.name))
			}
			d -= n * u.d
		}
	}
	if len(parts) == 0 {
		return d.String()
	}
	return strings.Join(parts, " ")
}
