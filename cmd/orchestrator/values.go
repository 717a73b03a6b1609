package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// How Arrow values are shown: package rowtext renders them, the same for the web. Every
// rendering is exact: decimals keep their scale ("12.50"), timestamps are RFC 3339 in UTC
// with as many fractional digits as they need ("2026-01-14T09:30:00.25Z"; a timestamp_ntz
// has no zone: "2026-01-14T09:30:00"), dates are YYYY-MM-DD, binary is base64, and
// structs, lists and maps are JSON. In JSON output integers and decimals are numbers
// written with all their digits, NaN and infinities strings.
const timestampLayout = rowtext.TimestampLayout

// numericType reports whether a column of this type is right-aligned in text output.
func numericType(t arrow.DataType) bool { return rowtext.Numeric(t) }

// arrowCell renders row i of arr.
func arrowCell(arr arrow.Array, i int) cell { return rowtext.At(arr, i) }

func intCell(v int64) cell { return rowtext.Int(v) }

// formatTime renders an instant as RFC 3339 in UTC (history timestamps, --timestamp).
func formatTime(t time.Time) string {
	return t.UTC().Format(timestampLayout)
}

// countCell is a count for people: 10,000,024 in text, the number in JSON.
func countCell(v int64) cell {
	c := intCell(v)
	c.Text = countText(v)
	return c
}

// countText writes a count with thousands separators: 10,000,024.
func countText(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// durationText is a duration for people: "40 µs", "0.9 ms", "850 ms", "12.4 s",
// "3 min 05 s", "2 h 10 min".
func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "0 s"
	case d < 100*time.Microsecond:
		return fmt.Sprintf("%d µs", max(d.Microseconds(), 1))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
}

// durationCell is a duration for people in text, its seconds in JSON.
func durationCell(d time.Duration) cell {
	return cell{Text: durationText(d), JSON: d.Seconds()}
}
