package web

import (
	"context"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// addChecks fills the Checks of a table's history rows: each version's row checks from
// its commitInfo (the counts a commit records), and the table checks that judged it from
// the run records of the runs that wrote the versions shown (a record the store no
// longer keeps adds none).
func (s *Server) addChecks(ctx context.Context, table string, entries []delta.HistoryEntry, rows []historyRow) {
	byVersion := map[int64]int{}
	runs := map[string]bool{}
	for i, h := range entries {
		byVersion[h.Version] = i
		l := h.Lineage
		if l == nil {
			continue
		}
		for _, m := range l.Expectations {
			rows[i].Checks = append(rows[i].Checks, scheduler.Check{Name: m.Name, Check: jobs.CheckExpect, Action: m.OnViolation,
				Table: table, Version: h.Version, Rows: m.NumCheckedRows, Failed: m.NumFailedRows})
		}
		if l.RunID != "" {
			runs[l.RunID] = true
		}
	}
	for id := range runs {
		if pipeline, _, err := scheduler.ParseID(id); err != nil || s.sched.Pipeline(pipeline) == nil {
			continue
		}
		rec, err := s.sched.Record(ctx, id)
		if err != nil {
			continue
		}
		for _, st := range rec.Stages {
			for _, c := range st.Checks {
				if i, ok := byVersion[c.Version]; ok && c.Table == table && c.Check != jobs.CheckExpect {
					rows[i].Checks = append(rows[i].Checks, c)
				}
			}
		}
	}
}
