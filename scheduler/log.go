package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// A stage's log: its state changes (attempts, retries, failures) and whatever it logs
// through slog, one line each. The record keeps the last maxLogLines; when a stage logs
// more, the whole log (up to maxLogBytes) goes to a log object the record names.
const (
	maxLogLines = 200
	maxLogBytes = 4 << 20
)

// stageLog collects one stage's lines. It is guarded by its run's mutex.
type stageLog struct {
	all          bytes.Buffer // every line up to maxLogBytes
	full         bool         // all stopped at maxLogBytes
	written      bool         // the log object is up to date
	lastProgress time.Time    // when a progress line was logged last
}

// logLine appends a line to a stage's log (st.mu held).
func (st *runState) logLine(stage string, t time.Time, format string, args ...any) {
	s := st.rec.Stage(stage)
	if s == nil {
		return
	}
	line := t.UTC().Format("15:04:05.000") + " " + fmt.Sprintf(format, args...)
	line = strings.ReplaceAll(line, "\n", "\n  ")
	lg := st.logs[stage]
	if lg == nil {
		lg = &stageLog{}
		st.logs[stage] = lg
	}
	if lg.all.Len()+len(line) < maxLogBytes {
		lg.all.WriteString(line + "\n")
	} else {
		lg.full = true
	}
	lg.written = false
	s.Log = append(s.Log, line)
	if len(s.Log) > maxLogLines {
		s.Log = s.Log[len(s.Log)-maxLogLines:]
		s.LogDropped++
	}
	st.touch() // the line reaches the pages within seconds
}

// logHandler is the slog handler of one stage: lines go to the stage's log, and to next
// (a CLI's display) when next takes their level.
type logHandler struct {
	st    *runState
	stage string
	attrs []slog.Attr
	group string
	next  slog.Handler
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || (h.next != nil && h.next.Enabled(ctx, l))
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		var b strings.Builder
		b.WriteString(r.Level.String() + " " + r.Message)
		add := func(a slog.Attr) bool {
			key := a.Key
			if h.group != "" {
				key = h.group + "." + key
			}
			fmt.Fprintf(&b, " %s=%v", key, a.Value)
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		h.st.mu.Lock()
		h.st.logLine(h.stage, h.st.r.now(), "%s", b.String())
		h.st.mu.Unlock()
	}
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	if h.next != nil {
		c.next = h.next.WithAttrs(attrs)
	}
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = strings.TrimPrefix(h.group+"."+name, ".")
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}
