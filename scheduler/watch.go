package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// The scheduler watches two promises a pipeline makes (pipelines.Spec.Deadline and
// Freshness) at each tick of the lease holder:
//
//   - deadline: the run of a slot has ended within the deadline after the slot. A slot
//     whose run is still queued or running (or has no record) when its deadline passes
//     starts a breach; the breach follows the newest late slot and recovers when that
//     slot's run ends, however it ended (a failed run tells on_failure itself). A
//     skipped slot is not late: its record says why it did not run.
//   - freshness: the newest commit that changed a declared table's data (delta's
//     LastDataChange: its in-commit timestamp where the table has them) is at most the
//     freshness old. A table not created yet counts from when the watch began.
//
// Each breach notifies the pipeline's notify.on_failure webhooks once when it starts and
// once when it recovers. The state is kept in the run store (pipelines/<name>/watch.json)
// and written before a notification is sent, so neither a restart nor a second serve
// taking over the lease sends one twice.

// Watch kinds.
const (
	WatchDeadline  = "deadline"
	WatchFreshness = "freshness"
)

// Notification events of the watches.
const (
	EventDeadlineMissed     = "deadline_missed"
	EventDeadlineRecovered  = "deadline_recovered"
	EventFreshnessStale     = "freshness_stale"
	EventFreshnessRecovered = "freshness_recovered"
)

// DefaultWatchEvery is how often a table's freshness is read from its log.
const DefaultWatchEvery = time.Minute

// maxDeadlineSlots bounds the slots one tick judges (after a long downtime).
const maxDeadlineSlots = 100

// Watch is the state of one deadline (of a pipeline) or freshness (of a table) watch.
type Watch struct {
	Kind     string `json:"kind"`
	Pipeline string `json:"pipeline"`
	Table    string `json:"table,omitempty"`
	// Limit is the deadline or the freshness.
	Limit   time.Duration `json:"limit_ns"`
	Checked time.Time     `json:"checked,omitzero"`
	// Breached: the deadline was missed or the table is stale, since Since.
	Breached bool      `json:"breached"`
	Since    time.Time `json:"since,omitzero"`
	// Freshness: the newest data change (its Version and commit time LastChange) and
	// its Age when checked; Started is when the watch began (a table not created yet
	// counts from it).
	Version    int64         `json:"version,omitempty"`
	LastChange time.Time     `json:"last_change,omitzero"`
	Age        time.Duration `json:"age_ns,omitempty"`
	Started    time.Time     `json:"started,omitzero"`
	// Deadline: Slot is the newest slot judged (late or not), Run its run's id and
	// RunStatus its state when judged; Next the next slot to judge.
	Slot      time.Time `json:"slot,omitzero"`
	Run       string    `json:"run,omitempty"`
	RunStatus Status    `json:"run_status,omitempty"`
	Next      time.Time `json:"next,omitzero"`
	// Error is why the last check could not be made (the state before it stands).
	Error string `json:"error,omitempty"`
	// Notifications are the deliveries of its last breach and recovery.
	Notifications []Delivery `json:"notifications,omitempty"`
}

// Text says the watch's state for people.
func (w Watch) Text() string {
	switch {
	case w.Kind == WatchDeadline && w.Breached:
		return fmt.Sprintf("late: the run of slot %s had not ended %s after it", w.Slot.UTC().Format(time.RFC3339), shortDur(w.Limit))
	case w.Kind == WatchDeadline && w.Slot.IsZero():
		return fmt.Sprintf("deadline %s: no slot judged yet", shortDur(w.Limit))
	case w.Kind == WatchDeadline:
		return fmt.Sprintf("on time: the run of slot %s ended within %s", w.Slot.UTC().Format(time.RFC3339), shortDur(w.Limit))
	case w.LastChange.IsZero() && w.Breached:
		return fmt.Sprintf("stale: no data written since the watch began %s ago (freshness %s)", shortDur(w.Age), shortDur(w.Limit))
	case w.LastChange.IsZero():
		return fmt.Sprintf("no data written yet (freshness %s)", shortDur(w.Limit))
	case w.Breached:
		return fmt.Sprintf("stale: last data change v%d %s ago, more than its freshness %s", w.Version, shortDur(w.Age), shortDur(w.Limit))
	}
	return fmt.Sprintf("fresh: last data change v%d %s ago, within %s", w.Version, shortDur(w.Age), shortDur(w.Limit))
}

// shortDur writes a duration to the second without zero units: 26h, 45m, 3h40m, 90s.
func shortDur(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// pipeWatches is what is stored of one pipeline's watches.
type pipeWatches struct {
	Deadline  *Watch            `json:"deadline,omitempty"`
	Freshness map[string]*Watch `json:"freshness,omitempty"`
}

// Watches returns the state of the loaded pipelines' watches as this process last
// checked them (the lease holder checks; others show what they last saw), deadline
// first, then tables by name.
func (s *Scheduler) Watches(pipeline string) []Watch {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Watch
	for name, pw := range s.watches {
		if pipeline != "" && name != pipeline {
			continue
		}
		if ps := s.pipes[name]; ps == nil || ps.removed {
			continue
		}
		if pw.Deadline != nil {
			out = append(out, *pw.Deadline)
		}
		for _, w := range pw.Freshness {
			out = append(out, *w)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pipeline != b.Pipeline {
			return a.Pipeline < b.Pipeline
		}
		if a.Kind != b.Kind {
			return a.Kind == WatchDeadline
		}
		return a.Table < b.Table
	})
	return out
}

// checkWatches judges the deadlines and freshness of st's pipelines at now.
func (s *Scheduler) checkWatches(ctx context.Context, st *Store, now time.Time) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	type item struct {
		spec  *pipelines.Spec
		ps    *pipeState
		pause bool
	}
	s.mu.Lock()
	var todo []item
	for name, ps := range s.pipes {
		if ps.store != st || ps.removed || (ps.spec.Deadline == 0 && len(ps.spec.Freshness) == 0) {
			continue
		}
		_, paused := s.pausedIn[st][name]
		todo = append(todo, item{ps.spec, ps, paused})
	}
	s.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].spec.Name < todo[j].spec.Name })
	for _, it := range todo {
		s.checkPipeline(ctx, st, it.spec, it.ps, it.pause, now)
	}
}

// watchState returns the pipeline's watches, read from the store the first time.
func (s *Scheduler) watchState(ctx context.Context, st *Store, name string) (*pipeWatches, error) {
	s.mu.Lock()
	pw := s.watches[name]
	s.mu.Unlock()
	if pw != nil {
		return pw, nil
	}
	pw = &pipeWatches{}
	if err := st.getJSON(ctx, stateKey(name, "watch"), pw); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return nil, err
	}
	s.mu.Lock()
	s.watches[name] = pw
	s.mu.Unlock()
	return pw, nil
}

// change is a breach or recovery to notify.
type change struct {
	event string
	w     *Watch
}

func (s *Scheduler) checkPipeline(ctx context.Context, st *Store, spec *pipelines.Spec, ps *pipeState, paused bool, now time.Time) {
	pw, err := s.watchState(ctx, st, spec.Name)
	if err != nil {
		s.log.Warn("read the watches", "pipeline", spec.Name, "err", err)
		return
	}
	s.mu.Lock()
	next := cloneWatches(pw)
	sched := ps.sched
	if !ps.loaded {
		sched = nil
	}
	s.mu.Unlock()
	var changes []change
	if spec.Deadline > 0 && sched != nil {
		if next.Deadline == nil {
			next.Deadline = &Watch{Kind: WatchDeadline, Pipeline: spec.Name}
		}
		w := next.Deadline
		w.Limit = spec.Deadline
		if w.Next.IsZero() { // slots whose deadline is still to come
			w.Next = sched.Next(now.Add(-spec.Deadline))
		}
		if paused && !w.Breached {
			// A paused schedule runs no slot: none is late. Judging resumes from now.
			w.Next = sched.Next(now.Add(-spec.Deadline))
		}
		for n := 0; n < maxDeadlineSlots && !w.Next.IsZero() && !w.Next.Add(spec.Deadline).After(now); n++ {
			id := SlotID(spec.Name, w.Next)
			status, err := s.runStatus(ctx, st, id)
			if err != nil {
				w.Error = err.Error()
				break
			}
			w.Error = ""
			w.Slot, w.Run, w.RunStatus = w.Next, id, status
			if status == "" || status.Active() {
				if !w.Breached {
					w.Breached, w.Since = true, w.Next.Add(spec.Deadline)
					changes = append(changes, change{EventDeadlineMissed, w})
				}
			}
			w.Next = sched.Next(w.Next)
		}
		if w.Breached && w.Run != "" {
			status, err := s.runStatus(ctx, st, w.Run)
			if err == nil && status != "" && !status.Active() {
				w.Breached, w.RunStatus, w.Since = false, status, time.Time{}
				changes = append(changes, change{EventDeadlineRecovered, w})
			}
		}
		w.Checked = now.UTC()
	} else {
		next.Deadline = nil
	}
	fresh := map[string]*Watch{}
	for table, limit := range spec.Freshness {
		w := next.Freshness[table]
		if w == nil {
			w = &Watch{Kind: WatchFreshness, Pipeline: spec.Name, Table: table, Started: now.UTC()}
		}
		w.Limit = limit
		fresh[table] = w
		if !w.Checked.IsZero() && now.Sub(w.Checked) < s.cfg.WatchEvery && now.After(w.Checked) {
			continue
		}
		t := spec.Table(table)
		if t == nil {
			continue
		}
		dc, err := delta.LastDataChange(ctx, st.Objects(), t.Path)
		switch {
		case errors.Is(err, objectstore.ErrNotExist):
			w.Error, w.Version, w.LastChange, w.Age = "", 0, time.Time{}, now.Sub(w.Started)
		case err != nil:
			w.Error = err.Error()
			s.log.Warn("read a table's freshness", "pipeline", spec.Name, "table", table, "err", err)
			continue
		default:
			w.Error, w.Version, w.LastChange, w.Age = "", dc.Version, dc.Timestamp, max(now.Sub(dc.Timestamp), 0)
		}
		w.Checked = now.UTC()
		stale := w.Age > limit
		switch {
		case stale && !w.Breached:
			w.Breached = true
			w.Since = now.UTC()
			if !w.LastChange.IsZero() {
				w.Since = w.LastChange.Add(limit)
			}
			changes = append(changes, change{EventFreshnessStale, w})
		case !stale && w.Breached:
			w.Breached, w.Since = false, time.Time{}
			changes = append(changes, change{EventFreshnessRecovered, w})
		}
	}
	next.Freshness = fresh
	// The state is stored before any notification goes out, so that a crash or a new
	// lease holder never sends one twice; a state that could not be stored sends none
	// (the next tick judges again).
	if len(changes) > 0 {
		for _, c := range changes {
			c.w.Notifications = nil
		}
		if err := st.putJSON(ctx, stateKey(spec.Name, "watch"), next, false); err != nil {
			s.log.Warn("store the watches", "pipeline", spec.Name, "err", err)
			return
		}
	}
	s.mu.Lock()
	s.watches[spec.Name] = next
	s.mu.Unlock()
	for _, c := range changes {
		s.log.Info("watch "+c.event, "pipeline", spec.Name, "table", c.w.Table, "state", c.w.Text())
		s.notifyWatch(st, spec, c.event, *c.w)
	}
}

// runStatus is the state of run id: live when this process runs it, else stored; ""
// when it has no record.
func (s *Scheduler) runStatus(ctx context.Context, st *Store, id string) (Status, error) {
	if rec, ok := s.runner.Record(id); ok {
		return rec.Status, nil
	}
	rec, err := st.Get(ctx, id)
	switch {
	case errors.Is(err, objectstore.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	}
	return rec.Status, nil
}

// notifyWatch sends a breach or recovery to the pipeline's on_failure webhooks in the
// background and keeps the deliveries in the watch's state.
func (s *Scheduler) notifyWatch(st *Store, spec *pipelines.Spec, event string, w Watch) {
	n := s.runner.cfg.Notifier
	hooks := spec.Notify.OnFailure
	if n == nil || len(hooks) == 0 {
		return
	}
	s.runner.wg.Go(func() {
		ds := n.SendWatch(context.Background(), w, event, hooks)
		s.watchMu.Lock() // after the tick that started it: its state is stored first
		defer s.watchMu.Unlock()
		s.mu.Lock()
		pw := s.watches[spec.Name]
		var cur *Watch
		if pw != nil {
			cur = pw.Deadline
			if w.Kind == WatchFreshness {
				cur = pw.Freshness[w.Table]
			}
		}
		if cur != nil {
			cur.Notifications = append(cur.Notifications, ds...)
		}
		var snap *pipeWatches
		if pw != nil {
			snap = cloneWatches(pw)
		}
		s.mu.Unlock()
		if snap != nil {
			if err := st.putJSON(context.Background(), stateKey(spec.Name, "watch"), snap, false); err != nil {
				s.log.Warn("store the watches' notifications", "pipeline", spec.Name, "err", err)
			}
		}
	})
}

func cloneWatches(pw *pipeWatches) *pipeWatches {
	c := &pipeWatches{Freshness: map[string]*Watch{}}
	if pw.Deadline != nil {
		d := *pw.Deadline
		d.Notifications = append([]Delivery(nil), d.Notifications...)
		c.Deadline = &d
	}
	for k, w := range pw.Freshness {
		f := *w
		f.Notifications = append([]Delivery(nil), f.Notifications...)
		c.Freshness[k] = &f
	}
	return c
}
