package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// runDisplay shows a run's progress on stderr. On a terminal it redraws one line per
// stage (state, elapsed time, rows) a few times a second; elsewhere (a pipe, a log file,
// the tests) it writes a line per state change. It also collects each stage's last
// result for the summary. Stages report from their own goroutines, hence the mutex.
type runDisplay struct {
	w    io.Writer
	now  func() time.Time
	live bool

	mu     sync.Mutex // guards everything below
	order  []string
	stages map[string]*stageView
	drawn  int // lines drawn by the last redraw (live mode)

	stopTicker chan struct{}
	tickerDone sync.WaitGroup
}

// stageView is what is known of one stage.
type stageView struct {
	state    dag.State
	attempts int
	start    time.Time // of the first attempt
	end      time.Time
	progress jobs.Progress
	result   jobs.Result
	err      error
}

func newRunDisplay(w io.Writer, now func() time.Time) *runDisplay {
	return &runDisplay{w: w, now: now, live: isTerminal(w), stages: map[string]*stageView{}}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// start sets the stages (in ready order) and, on a terminal, starts redrawing.
func (d *runDisplay) start(order []string) {
	d.mu.Lock()
	d.order = order
	for _, name := range order {
		d.stages[name] = &stageView{state: dag.Queued}
	}
	d.mu.Unlock()
	if !d.live {
		return
	}
	d.stopTicker = make(chan struct{})
	d.tickerDone.Add(1)
	go func() {
		defer d.tickerDone.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-d.stopTicker:
				return
			case <-t.C:
				d.mu.Lock()
				d.redraw()
				d.mu.Unlock()
			}
		}
	}()
}

// stop ends the redrawing goroutine, after a last redraw, and waits for it.
func (d *runDisplay) stop() {
	if !d.live {
		return
	}
	close(d.stopTicker)
	d.tickerDone.Wait()
	d.mu.Lock()
	d.redraw()
	d.drawn = 0
	d.mu.Unlock()
}

// event is the dag observer.
func (d *runDisplay) event(ev dag.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stages[ev.Node]
	if s == nil {
		return
	}
	s.state = ev.State
	switch {
	case ev.State == dag.Running:
		s.attempts = ev.Attempt
		if s.start.IsZero() {
			s.start = ev.Time
		}
		s.progress = jobs.Progress{}
	case ev.State.Terminal():
		s.end = ev.Time
		if ev.Err != nil {
			s.err = ev.Err
		}
	}
	if d.live {
		d.redraw()
		return
	}
	line := fmt.Sprintf("%s: %s", ev.Node, ev.State)
	switch ev.State {
	case dag.Running:
		if ev.Attempt > 1 {
			line += fmt.Sprintf(" (attempt %d)", ev.Attempt)
		}
	case dag.Retrying:
		line += fmt.Sprintf(" in %s after attempt %d failed: %v", durationText(ev.Delay), ev.Attempt, ev.Err)
	case dag.Succeeded:
		line += fmt.Sprintf(" in %s: %s", durationText(s.end.Sub(s.start)), rowsText(s.result))
		for _, n := range s.result.Notes {
			line += "\n  " + n
		}
		for _, c := range scheduler.ChecksOf(s.result.Expectations) {
			line += "\n  " + c.Text()
		}
	case dag.Failed, dag.Cancelled:
		if ev.Err != nil {
			line += ": " + ev.Err.Error()
		}
		for _, c := range scheduler.ChecksOf(s.result.Expectations) {
			line += "\n  " + c.Text()
		}
	case dag.Skipped:
		var se *dag.SkippedError
		if errors.As(ev.Err, &se) {
			line += fmt.Sprintf(": upstream stage %s failed", se.Upstream)
		}
	}
	if ev.State != dag.Queued {
		fmt.Fprintln(d.w, line)
	}
}

// progress receives running row counts from a stage.
func (d *runDisplay) progress(stage string, p jobs.Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.stages[stage]; s != nil {
		s.progress = p
	}
}

// done receives each attempt's result; the last one is the stage's.
func (d *runDisplay) done(stage string, attempt int, res jobs.Result, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.stages[stage]; s != nil {
		s.result = res
		s.progress = jobs.Progress{RowsRead: res.RowsRead, RowsWritten: res.RowsWritten}
	}
}

// Write lets log lines through without tearing the live display.
func (d *runDisplay) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		d.clear()
	}
	n, err := d.w.Write(p)
	if d.live {
		d.redraw()
	}
	return n, err
}

// clear moves the cursor up over the last drawing and erases it (live mode; d.mu held).
func (d *runDisplay) clear() {
	if d.drawn > 0 {
		fmt.Fprintf(d.w, "\x1b[%dA\x1b[J", d.drawn)
		d.drawn = 0
	}
}

// redraw draws one line per stage (live mode; d.mu held).
func (d *runDisplay) redraw() {
	d.clear()
	width := 0
	for _, name := range d.order {
		width = max(width, len(name))
	}
	var b strings.Builder
	now := d.now()
	for _, name := range d.order {
		s := d.stages[name]
		elapsed := ""
		switch {
		case !s.end.IsZero() && !s.start.IsZero():
			elapsed = s.end.Sub(s.start).Round(100 * time.Millisecond).String()
		case !s.start.IsZero():
			elapsed = now.Sub(s.start).Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  %-*s  %-9s  %8s  rows read %d, written %d\n", width, name, s.state, elapsed, s.progress.RowsRead, s.progress.RowsWritten)
	}
	io.WriteString(d.w, b.String())
	d.drawn = len(d.order)
}

func rowsText(r jobs.Result) string {
	t := fmt.Sprintf("%s rows read, %s written", countText(r.RowsRead), countText(r.RowsWritten))
	if len(r.VersionsWritten) > 0 {
		t += ", committed " + versionsText(r.VersionsWritten)
	}
	return t
}

// versionsText lists committed versions by table: "a@v1,v2 b@v4".
func versionsText(vs []jobs.TableVersion) string {
	var tables []string
	byTable := map[string][]string{}
	for _, v := range vs {
		if _, ok := byTable[v.Table]; !ok {
			tables = append(tables, v.Table)
		}
		byTable[v.Table] = append(byTable[v.Table], fmt.Sprintf("v%d", v.Version))
	}
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = t + "@" + strings.Join(byTable[t], ",")
	}
	return strings.Join(parts, " ")
}

// summaryColumns are the columns of the run summary; text output leaves out the notes
// (they can be long; the progress lines on stderr carry them).
var summaryColumns = []column{
	{name: "stage"},
	{name: "status"},
	{name: "attempts", numeric: true},
	{name: "duration", numeric: true},
	{name: "rows_in", numeric: true},
	{name: "rows_out", numeric: true},
	{name: "versions"},
	{name: "notes"},
}

// writeRunSummary prints the final table of a run: one row per stage, in ready order.
// Text output leaves out the notes.
func writeRunSummary(e *env, format string, rec *scheduler.Record) error {
	cols := summaryColumns
	rows := make([][]cell, 0, len(rec.Stages))
	for _, s := range rec.Stages {
		r := []cell{rowtext.Text(s.Name), rowtext.Text(string(s.Status)), intCell(int64(len(s.Attempts))), rowtext.Null, rowtext.Null, rowtext.Null, rowtext.Null, rowtext.Null}
		if !s.Start.IsZero() {
			r[3] = durationCell(s.End.Sub(s.Start))
		}
		if len(s.Attempts) > 0 {
			r[4], r[5] = countCell(s.RowsIn), countCell(s.RowsOut)
			// A stage that ran and committed nothing says so, rather than NULL.
			r[6] = cell{Text: "none", JSON: []any{}}
			if vs := s.VersionsWritten; len(vs) > 0 {
				list := make([]any, len(vs))
				tvs := make([]jobs.TableVersion, len(vs))
				for i, v := range vs {
					list[i] = rowtext.Object{{Key: "table", Value: v.Table}, {Key: "version", Value: v.Version}}
					tvs[i] = jobs.TableVersion{Table: v.Table, Version: v.Version}
				}
				r[6] = cell{Text: versionsText(tvs), JSON: list}
			}
		}
		notes := append([]string(nil), s.Notes...)
		if s.Error != "" && s.Status != scheduler.Succeeded {
			notes = append(notes, s.Error)
		}
		if s.Reason != "" {
			notes = append(notes, string(s.Status)+": "+s.Reason)
		}
		if len(notes) > 0 {
			r[7] = cell{Text: strings.Join(notes, "; "), JSON: notes}
		}
		if format == formatText {
			r = r[:len(r)-1]
		}
		rows = append(rows, r)
	}
	if format == formatText {
		cols = cols[:len(cols)-1]
	}
	return writeRows(e, format, cols, rows)
}
