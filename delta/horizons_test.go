package delta_test

import (
	"context"
	"testing"
	"time"
)

// TestHorizons: of v0..v10, one every 5 days, with files kept 7 days and the log 30
// days, a vacuum now spares the changes from v9 on (the first version of the last 7
// days) and a log cleanup keeps the log from checkpoint v2 on (the newest checkpoint at
// or before the newest commit older than the cutoff, v3).
func TestHorizons(t *testing.T) {
	tbl, _, clock := cleanupTable(t, map[string]string{
		"delta.deletedFileRetentionDuration": "interval 7 days",
		"delta.logRetentionDuration":         "interval 30 days",
	})
	h, err := tbl.Horizons(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Latest != 10 || h.VacuumVersion != 9 || h.LogVersion != 2 || h.Earliest > 2 {
		t.Errorf("horizons: latest %d, vacuum from v%d, log from v%d, earliest v%d; want 10, 9, 2, at most 2", h.Latest, h.VacuumVersion, h.LogVersion, h.Earliest)
	}
	if want := clock.Now().Add(-7 * 24 * time.Hour); !h.VacuumCutoff.Equal(want) || h.DeletedFileRetention != 7*24*time.Hour {
		t.Errorf("vacuum cutoff %v (retention %v), want %v", h.VacuumCutoff, h.DeletedFileRetention, want)
	}
	if len(h.Timestamps) != int(h.Latest-h.Earliest+1) {
		t.Errorf("%d timestamps for versions %d..%d", len(h.Timestamps), h.Earliest, h.Latest)
	}
	clock.Advance(30 * 24 * time.Hour) // every version is older than the file retention
	if h, err = tbl.Horizons(context.Background()); err != nil || h.VacuumVersion != 11 {
		t.Errorf("a month later: vacuum from v%d (%v), want 11 (no version keeps its changes)", h.VacuumVersion, err)
	}
}
