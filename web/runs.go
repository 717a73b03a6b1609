package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// runsQuery is a filtered, paginated list of runs (GET /api/v1/runs, the runs grid).
type runsQuery struct {
	pipelines []string // loaded pipelines to list
	status    []scheduler.Status
	trigger   []scheduler.TriggerKind
	limit     int
	cursor    map[string]int64 // per pipeline, list below this index number (0: from the newest); absent: done
	hasCursor bool
	// from and to bound the runs' creation times (zero: open).
	from, to time.Time
}

// maxListLimit caps a page of runs.
const maxListLimit = 500

// Run states and trigger kinds a filter may name.
var (
	runStates    = []scheduler.Status{scheduler.Queued, scheduler.Running, scheduler.Succeeded, scheduler.Failed, scheduler.Cancelled, scheduler.Skipped, scheduler.Interrupted}
	triggerKinds = []scheduler.TriggerKind{scheduler.Scheduled, scheduler.Catchup, scheduler.Manual, scheduler.Backfill, scheduler.Retry, scheduler.Rollback}
)

// parseRunsQuery reads pipeline, status, trigger, limit and cursor.
func (s *Server) parseRunsQuery(q url.Values, defaultLimit int) (*runsQuery, error) {
	rq := &runsQuery{limit: defaultLimit}
	if names := splitList(q["pipeline"]); len(names) > 0 {
		for _, n := range names {
			if s.sched.Pipeline(n) == nil {
				return nil, notFoundf("no loaded pipeline %q", n)
			}
			rq.pipelines = append(rq.pipelines, n)
		}
	} else {
		for _, spec := range s.pipelines() {
			rq.pipelines = append(rq.pipelines, spec.Name)
		}
	}
	for _, v := range splitList(q["status"]) {
		st := scheduler.Status(v)
		if !slices.Contains(runStates, st) {
			return nil, badRequestf("status %q: want one of %s", v, joinStrings(runStates))
		}
		rq.status = append(rq.status, st)
	}
	for _, v := range splitList(q["trigger"]) {
		k := scheduler.TriggerKind(v)
		if !slices.Contains(triggerKinds, k) {
			return nil, badRequestf("trigger %q: want one of %s", v, joinStrings(triggerKinds))
		}
		rq.trigger = append(rq.trigger, k)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return nil, badRequestf("limit %q: want a number from 1 to %d", v, maxListLimit)
		}
		rq.limit = n
	}
	for _, b := range []struct {
		name string
		t    *time.Time
		end  bool
	}{{"from", &rq.from, false}, {"to", &rq.to, true}} {
		if v := strings.TrimSpace(q.Get(b.name)); v != "" {
			t, err := parseWhen(v, b.end)
			if err != nil {
				return nil, badRequestf("%s %q: %v", b.name, v, err)
			}
			*b.t = t
		}
	}
	if !rq.from.IsZero() && !rq.to.IsZero() && rq.to.Before(rq.from) {
		return nil, badRequestf("to %s is before from %s", rq.to.Format(time.RFC3339), rq.from.Format(time.RFC3339))
	}
	if c := q.Get("cursor"); c != "" {
		m, err := decodeCursor(c)
		if err != nil {
			return nil, badRequestf("cursor: %v", err)
		}
		for p := range m {
			if !slices.Contains(rq.pipelines, p) {
				return nil, badRequestf("cursor: not one this listing gave (it goes on with pipeline %q, which the listing does not have)", p)
			}
		}
		rq.cursor, rq.hasCursor = m, true
	}
	return rq, nil
}

// parseWhen reads a time of a range: RFC 3339, or a date and time without a zone (UTC),
// or a date (its start; its end when end is set, so that to=2026-01-14 takes the day).
func parseWhen(v string, end bool) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		if end {
			return t.Add(24*time.Hour - time.Nanosecond), nil
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a time such as 2026-01-14, 2026-01-14T09:30 (UTC) or 2026-01-14T09:30:00+01:00")
}

func (rq *runsQuery) filter() scheduler.Filter {
	if len(rq.status) == 0 && len(rq.trigger) == 0 && rq.from.IsZero() && rq.to.IsZero() {
		return nil
	}
	return func(e scheduler.Entry) bool {
		return (len(rq.status) == 0 || slices.Contains(rq.status, e.Status) ||
			e.WasInterrupted && slices.Contains(rq.status, scheduler.Interrupted)) &&
			(len(rq.trigger) == 0 || slices.Contains(rq.trigger, e.Trigger)) &&
			(rq.from.IsZero() || !e.Created.Before(rq.from)) && (rq.to.IsZero() || !e.Created.After(rq.to))
	}
}

// encodeCursor and decodeCursor carry where each pipeline's listing goes on.
func encodeCursor(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string) (map[string]int64, error) {
	if len(c) > 8192 {
		return nil, fmt.Errorf("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("not a cursor this server gave")
	}
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a cursor this server gave")
	}
	for _, v := range m {
		if v < 0 {
			return nil, fmt.Errorf("not a cursor this server gave")
		}
	}
	return m, nil
}

// listRuns returns a page of runs, newest first, across the query's pipelines, and the
// cursor of the next page ("" at the end).
func (s *Server) listRuns(ctx context.Context, rq *runsQuery) ([]scheduler.Entry, string, error) {
	type part struct {
		entries []scheduler.Entry
		before  int64
		next    int64
	}
	var names []string
	for _, p := range rq.pipelines {
		if _, ok := rq.cursor[p]; ok || !rq.hasCursor {
			names = append(names, p)
		}
	}
	parts := make([]part, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, p := range names {
		g.Go(func() error {
			st := s.sched.StoreOf(p)
			if st == nil {
				return nil
			}
			before, ok := rq.cursor[p]
			if !ok && !rq.to.IsZero() { // a range that ends in the past: start there
				var err error
				if before, err = st.SeqAfter(gctx, p, rq.to); err != nil {
					return err
				}
			}
			es, next, err := st.PageWith(gctx, p, scheduler.PageOptions{Before: before, Limit: rq.limit, Filter: rq.filter(), Since: rq.from})
			if err != nil {
				return err
			}
			parts[i] = part{entries: es, before: before, next: next}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	var all []scheduler.Entry
	for _, p := range parts {
		all = append(all, p.entries...)
	}
	scheduler.SortEntries(all)
	if len(all) > rq.limit {
		all = all[:rq.limit]
	}
	taken := map[string]int{}
	lastSeq := map[string]int64{}
	for _, e := range all {
		taken[e.Pipeline]++
		lastSeq[e.Pipeline] = e.Seq
	}
	cursor := map[string]int64{}
	for i, p := range names {
		pt := parts[i]
		switch k := taken[p]; {
		case k == 0 && len(pt.entries) > 0:
			cursor[p] = pt.before
		case k == 0 || k == len(pt.entries):
			if pt.next > 0 {
				cursor[p] = pt.next
			}
		default:
			cursor[p] = lastSeq[p]
		}
	}
	return all, encodeCursor(cursor), nil
}

// gridRow is a run with its stages' states (the runs grid).
type gridRow struct {
	runEntry
	Stages map[string]scheduler.Status `json:"stages"`
}

// grid returns a page of a pipeline's runs with each stage's state, and the stage
// columns: the pipeline's stages in order, then stages only older runs had.
func (s *Server) grid(ctx context.Context, name string, rq *runsQuery) ([]string, []gridRow, string, error) {
	entries, next, err := s.listRuns(ctx, rq)
	if err != nil {
		return nil, nil, "", err
	}
	st := s.sched.StoreOf(name)
	rows := make([]gridRow, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	now := s.cfg.Now()
	for i, e := range entries {
		rows[i] = gridRow{runEntry: entryView(s.fresh(e), now), Stages: map[string]scheduler.Status{}}
		if e.Status == scheduler.Skipped || e.Trigger == scheduler.Rollback {
			continue // a rollback's steps are no stages of the pipeline: its row shows its state
		}
		g.Go(func() error {
			rec, ok := s.sched.Runner().Record(e.ID)
			if !ok {
				var err error
				if rec, err = st.Get(gctx, e.ID); err != nil {
					return nil // removed meanwhile: its row shows the index entry only
				}
			}
			for _, sr := range rec.Stages {
				rows[i].Stages[sr.Name] = sr.Status
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, "", err
	}
	var cols []string
	if spec := s.sched.Pipeline(name); spec != nil {
		for _, stg := range spec.Stages {
			cols = append(cols, stg.Name)
		}
	}
	var extra []string
	for _, r := range rows {
		for n := range r.Stages {
			if !slices.Contains(cols, n) && !slices.Contains(extra, n) {
				extra = append(extra, n)
			}
		}
	}
	sort.Strings(extra)
	return append(cols, extra...), rows, next, nil
}

// splitList reads a repeatable, comma-separated query parameter.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func joinStrings[T ~string](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}
