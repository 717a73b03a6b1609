package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/web"
)

// pipelineDir is the pipelines of a directory (its *.yaml and *.yml files, not its
// subdirectories), as serve runs them and the runs commands find their run stores. An
// invalid file is reported and skipped; an invalid change to a file that was valid keeps
// its previous version.
type pipelineDir struct {
	dir   string
	files map[string]*pipelineFile // by path
}

type pipelineFile struct {
	spec    *pipelines.Spec // the last valid version; nil if it never was
	modTime time.Time
	size    int64
	problem string // why the file on disk is not spec, if it is not
}

func newPipelineDir(dir string) (*pipelineDir, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("--pipelines %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("--pipelines %s: not a directory", dir)
	}
	return &pipelineDir{dir: dir, files: map[string]*pipelineFile{}}, nil
}

// scanNote is one thing a scan found: a file loaded, reloaded, removed or invalid.
type scanNote struct {
	warn     bool   // a problem (an invalid file)
	msg      string // what happened, e.g. "pipeline file invalid, skipped"
	file     string
	pipeline string
	schedule string // of a pipeline loaded
	problem  string // of an invalid file: its problems, one per line
}

// text is the note as one line of text (and the problems below it), as the runs
// commands print it.
func (n scanNote) text() string {
	t := n.file + ": " + n.msg
	if n.pipeline != "" {
		t += ", pipeline " + n.pipeline
	}
	if n.schedule != "" {
		t += " (" + n.schedule + ")"
	}
	if n.problem != "" {
		t += ":\n" + n.problem
	}
	return t
}

// log writes the note to a structured log (serve's).
func (n scanNote) log(l *slog.Logger) {
	args := []any{"file", n.file}
	if n.pipeline != "" {
		args = append(args, "pipeline", n.pipeline)
	}
	if n.schedule != "" {
		args = append(args, "schedule", n.schedule)
	}
	if n.problem != "" {
		lines := strings.Split(n.problem, "\n")
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		args = append(args, "problems", strings.Join(lines, "; "))
	}
	if n.warn {
		l.Warn(n.msg, args...)
	} else {
		l.Info(n.msg, args...)
	}
}

// scan reads the files that are new or changed since the last scan and says what it
// loaded and what it skipped. changed says whether the set of valid pipelines changed.
func (d *pipelineDir) scan(e *env) (changed bool, report []scanNote) {
	var paths []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, _ := filepath.Glob(filepath.Join(d.dir, pat))
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	seen := map[string]bool{}
	for _, path := range paths {
		seen[path] = true
		fi, err := os.Stat(path)
		if err != nil || fi.IsDir() {
			continue
		}
		f := d.files[path]
		if f != nil && f.modTime.Equal(fi.ModTime()) && f.size == fi.Size() {
			continue
		}
		if f == nil {
			f = &pipelineFile{}
			d.files[path] = f
		}
		f.modTime, f.size = fi.ModTime(), fi.Size()
		spec, err := pipelines.Load(path, pipelines.Options{LookupEnv: e.lookupEnv})
		if err != nil {
			f.problem = problemText(err)
			if f.spec != nil {
				report = append(report, scanNote{warn: true, msg: "invalid change: its previous version goes on", file: path, pipeline: f.spec.Name, problem: f.problem})
			} else {
				report = append(report, scanNote{warn: true, msg: "invalid, skipped", file: path, problem: f.problem})
			}
			continue
		}
		msg := "loaded"
		if f.spec != nil {
			msg = "reloaded"
		}
		f.spec, f.problem, changed = spec, "", true
		report = append(report, scanNote{msg: msg, file: path, pipeline: spec.Name, schedule: scheduleText(spec)})
	}
	for path, f := range d.files {
		if !seen[path] {
			delete(d.files, path)
			if f.spec != nil {
				changed = true
				report = append(report, scanNote{msg: "removed: no longer scheduled", file: path, pipeline: f.spec.Name})
			}
		}
	}
	return changed, report
}

// problemText renders a load error, one problem per line.
func problemText(err error) string {
	var perr *pipelines.Error
	if errors.As(err, &perr) {
		lines := make([]string, len(perr.Problems))
		for i, p := range perr.Problems {
			lines[i] = "  " + p.String()
		}
		return strings.Join(lines, "\n")
	}
	return "  " + err.Error()
}

func scheduleText(spec *pipelines.Spec) string {
	if spec.Schedule == "" {
		return "on demand only"
	}
	return fmt.Sprintf("schedule %q in %s", spec.Schedule, spec.Location)
}

// specs returns the valid pipelines, each name once (the first file in name order wins;
// the others are listed in dups), sorted by name.
func (d *pipelineDir) specs() (out []*pipelines.Spec, dups []string) {
	paths := make([]string, 0, len(d.files))
	for p := range d.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	byName := map[string]string{}
	for _, p := range paths {
		s := d.files[p].spec
		if s == nil {
			continue
		}
		if first, ok := byName[s.Name]; ok {
			dups = append(dups, fmt.Sprintf("%s: pipeline %s is also defined in %s, which wins; skipped", p, s.Name, first))
			continue
		}
		byName[s.Name] = p
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *pipelines.Spec) int { return strings.Compare(a.Name, b.Name) })
	return out, dups
}

// loadErrors lists the files whose current content is invalid, with their problems and
// the pipeline that goes on with its previous version.
func (d *pipelineDir) loadErrors() []web.LoadError {
	var out []web.LoadError
	for p, f := range d.files {
		if f.problem != "" {
			le := web.LoadError{File: p, Problem: f.problem}
			if f.spec != nil {
				le.Pipeline = f.spec.Name
			}
			out = append(out, le)
		}
	}
	slices.SortFunc(out, func(a, b web.LoadError) int { return strings.Compare(a.File, b.File) })
	return out
}
