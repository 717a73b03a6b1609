package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// Progress of a running stage: what it reports (jobs.Progress) is kept in its
// StageRecord, the record is saved at most every progressSaveEvery (so the run page,
// which follows the saves, and `runs show` see it move), and its log gets a progress
// line every progressLogEvery, so that a slow stage can be told from a hung one.

const (
	progressSaveEvery = 2 * time.Second
	progressLogEvery  = 10 * time.Second
)

// StageProgress is what a running stage last reported.
type StageProgress struct {
	RowsRead    int64 `json:"rows_read,omitempty"`
	RowsWritten int64 `json:"rows_written,omitempty"`
	// FilesDone and BytesRead are the source files decoded and their bytes, of
	// FilesTotal and BytesTotal (ingest).
	FilesDone  int   `json:"files_done,omitempty"`
	FilesTotal int   `json:"files_total,omitempty"`
	BytesRead  int64 `json:"bytes_read,omitempty"`
	BytesTotal int64 `json:"bytes_total,omitempty"`
	// Pass of Passes: a stage over its memory budget works in passes over spill files.
	Pass   int `json:"pass,omitempty"`
	Passes int `json:"passes,omitempty"`
	// Parts: the parts of a MERGE in parts done.
	Parts int    `json:"merge_parts,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Updated is when the stage reported last.
	Updated time.Time `json:"updated"`
}

// merge takes a report's news: the fields it sets.
func (p *StageProgress) merge(r jobs.Progress, now time.Time) {
	if r.RowsRead > 0 {
		p.RowsRead = r.RowsRead
	}
	if r.RowsWritten > 0 {
		p.RowsWritten = r.RowsWritten
	}
	if r.FilesTotal > 0 {
		p.FilesTotal, p.BytesTotal = r.FilesTotal, r.BytesTotal
	}
	if r.FilesDone > 0 {
		p.FilesDone = r.FilesDone
	}
	if r.BytesRead > 0 {
		p.BytesRead = r.BytesRead
	}
	if r.Passes > 0 {
		p.Pass, p.Passes = r.Pass, r.Passes
	}
	if r.Parts > 0 {
		p.Parts = r.Parts
	}
	if r.Phase != "" {
		p.Phase = r.Phase
	}
	p.Updated = now.UTC()
}

// Text says it for people: "1,200,000 rows read · 3 of 10 files (1.2 GB of 4.0 GB) ·
// pass 2 of 5 · 4 MERGE parts".
func (p *StageProgress) Text() string {
	var parts []string
	if p.RowsRead > 0 {
		parts = append(parts, countText(p.RowsRead)+" rows read")
	}
	if p.FilesTotal > 0 {
		f := fmt.Sprintf("%d of %d files", min(p.FilesDone, p.FilesTotal), p.FilesTotal)
		if p.BytesTotal > 0 {
			f += fmt.Sprintf(" (%s of %s)", bytesText(min(p.BytesRead, p.BytesTotal)), bytesText(p.BytesTotal))
		}
		parts = append(parts, f)
	}
	if p.Passes > 0 {
		parts = append(parts, fmt.Sprintf("pass %d of %d over the memory budget", p.Pass, p.Passes))
	}
	if p.Parts > 0 {
		parts = append(parts, fmt.Sprintf("%d MERGE parts done", p.Parts))
	}
	if len(parts) == 0 && p.Phase != "" {
		parts = append(parts, p.Phase)
	}
	return strings.Join(parts, " · ")
}

// progress takes a stage's report.
func (st *runState) progress(stage string, r jobs.Progress) {
	now := st.r.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.rec.Stage(stage)
	if s == nil || !s.Status.Active() { // a report may come before the stage's running event
		return
	}
	if s.Progress == nil {
		s.Progress = &StageProgress{}
	}
	s.Progress.merge(r, now)
	s.RowsIn, s.RowsOut = max(s.RowsIn, s.Progress.RowsRead), max(s.RowsOut, s.Progress.RowsWritten)
	lg := st.logs[stage]
	if lg == nil || now.Sub(lg.lastProgress) >= progressLogEvery {
		st.logLine(stage, now, "progress: %s", s.Progress.Text())
		st.logs[stage].lastProgress = now
	}
	st.touch()
}

// touch saves the record within progressSaveEvery, once for every change that comes
// meanwhile (st.mu held): progress and log lines reach the pages as they happen.
func (st *runState) touch() {
	if st.touching || st.ended {
		return
	}
	st.touching = true
	st.touchTimer = time.AfterFunc(progressSaveEvery, func() {
		st.mu.Lock()
		st.touching = false
		ended := st.ended
		st.mu.Unlock()
		if !ended {
			st.saveSoon(st.hard)
		}
	})
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

// bytesText writes a size for people: 812 B, 3.4 MB (powers of 1024).
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "KMGTP"[exp])
}
