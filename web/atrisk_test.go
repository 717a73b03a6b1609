package web

import (
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// A reader behind what the log or a vacuum keeps is at risk: a change feed reader
// breaks, a fact_load of a snapshot source (which opens the version it last loaded
// too) only reads the whole snapshot at its next run.
func TestAtRisk(t *testing.T) {
	feed, snap := jobs.Consumer{}, jobs.Consumer{Snapshot: true}
	h := &delta.Horizons{Latest: 9, Earliest: 5, LogVersion: 7, VacuumVersion: 9}
	for _, c := range []struct {
		c    jobs.Consumer
		next int64
		want string // a part of the text ("": not at risk)
	}{
		{feed, 4, "broken: it has yet to read version 4, which is no longer in the log (it starts at 5)"},
		{snap, 5, "slower: version 4, which it last loaded, is no longer in the log (it starts at 5): its next run reads the whole snapshot"},
		{feed, 5, "would remove versions 5 to 6, which it has yet to read"},
		{snap, 6, "would remove versions 5 to 6: its next run would read the whole snapshot"},
		{snap, 7, "would remove versions 6 to 6: its next run would read the whole snapshot"},
		{feed, 7, "would delete the changes of versions 7 to 8, which it has yet to read"},
		{snap, 8, "would delete the changes of versions 8 to 8: its next run would read the whole snapshot"},
		{snap, 9, ""}, // (the version it last loaded, 8, is in the log; the changes since are kept)
		{feed, 10, ""},
		{snap, 10, ""}, // (read through the latest version, or not loaded yet)
	} {
		got := atRisk(c.c, c.next, h)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("snapshot %v, next %d: %q, want %q", c.c.Snapshot, c.next, got, c.want)
		}
	}
}
