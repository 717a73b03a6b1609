package cron

import (
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"0 2 * * *", "at 02:00 every day"},
		{"30 2 * * 1-5", "at 02:30 on weekdays"},
		{"*/15 * * * *", "every 15 minutes"},
		{"*/15 * * * 0,6", "every 15 minutes on weekends"},
		{"* * * * *", "every minute"},
		{"0 * * * *", "every hour, on the hour"},
		{"5,35 * * * *", "every hour at minute 5 and 35"},
		{"0 9-17 * * 1-5", "every hour from 09:00 to 17:00 on weekdays"},
		{"0 6,18 * * *", "at 06:00 and 18:00 every day"},
		{"0 0 1 * *", "at 00:00 on day 1 of the month"},
		{"0 0 1,15 1,7 *", "at 00:00 on day 1 and 15 of the month in January and July"},
		{"0 8 * * 1,3,5", "at 08:00 on Monday, Wednesday and Friday"},
		{"30 0 8 * * *", "at 08:00:30 every day"},
		{"@daily", "at 00:00 every day"},
		{"@hourly", "every hour, on the hour"},
		{"@weekly", "at 00:00 on Sunday"},
		{"@every 10m", "every 10 minutes"},
		{"@every 1h30m", "every 1 hour 30 minutes"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			if got := MustParse(tc.expr, time.UTC).Describe(); got != tc.want {
				t.Errorf("Describe(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}
