package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// gobench runs the delta package's go benchmarks of the gobench case (append vs plain pqarrow,
// snapshot load of 10,000 commits) and records their numbers as rows.
// With -baseline-tree, the same benchmarks run in that tree too, each row after ours. Each
// tree runs its benchmarks -repeat times, one go test process at a time and the trees in
// turn (as the other cases take their runs), and keeps each benchmark's fastest run: a
// process's own state (its heap, where its files landed) then weighs on both trees alike.
func (d *driver) gobench(ctx context.Context) error {
	trees := []struct{ dir, prefix string }{{d.root, ""}}
	if d.cfg.baselineTree != "" {
		trees = append(trees, struct{ dir, prefix string }{d.cfg.baselineTree, d.cfg.baselineName + ": "})
	}
	count := max(d.cfg.repeat, 1)
	best := make([]map[string]*row, len(trees))
	var order []string // our benchmarks in the order go test printed them
	for j := range trees {
		best[j] = map[string]*row{}
	}
	for i := 0; i < count; i++ {
		for j, t := range trees {
			rows, err := d.gobenchIn(ctx, t.dir, t.prefix)
			if err != nil {
				d.res.Rows = append(d.res.Rows, &row{Case: "go test -bench ./delta", Engine: t.prefix + gobenchPattern, Error: err.Error()})
				return nil
			}
			for _, r := range rows {
				old, ok := best[j][r.Engine]
				if !ok && j == 0 {
					order = append(order, r.Engine)
				}
				if !ok || r.Seconds < old.Seconds {
					best[j][r.Engine] = r
				}
			}
		}
	}
	turns := ""
	if len(trees) > 1 {
		turns = ", one process at a time in turn with " + d.cfg.baselineName
	}
	for j := range trees {
		for _, r := range best[j] {
			r.Note = strings.TrimSpace(fmt.Sprintf("%s go test -benchtime %s, fastest of %d%s", r.Note, d.cfg.benchtime, count, turns))
			r.OfBaseline = j > 0
		}
	}
	// Each baseline row right after ours of the same benchmark; plain pqarrow is a peer's
	// code, not ours, so only our tree's run of it is shown.
	ours := best[0]
	for _, name := range order {
		d.res.Rows = append(d.res.Rows, ours[name])
		if len(trees) > 1 && name != "BenchmarkPlainPqarrow" {
			if b := best[1][trees[1].prefix+name]; b != nil {
				d.res.Rows = append(d.res.Rows, b)
			}
		}
	}
	relate(ours["BenchmarkPlainPqarrow"], ours["BenchmarkPlainPqarrow"], ours["BenchmarkAppend"])
	return nil
}

const gobenchPattern = "^(BenchmarkAppend|BenchmarkPlainPqarrow|BenchmarkSnapshotLoad10000Commits)$"

// gobenchIn runs the benchmarks of the gobench case once in a tree and returns a row for
// each, its engine the benchmark's name after prefix, in the order go test printed them.
func (d *driver) gobenchIn(ctx context.Context, dir, prefix string) ([]*row, error) {
	argv := []string{"test", "./delta", "-run", "^$", "-bench", gobenchPattern, "-benchtime", d.cfg.benchtime, "-count", "1"}
	d.logf("gobench: go %s (in %s)", strings.Join(argv, " "), dir)
	cmd := exec.CommandContext(ctx, "go", argv...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, d.stderr), d.stderr
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	var rows []*row
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		r := &row{Case: "go test -bench ./delta (1,048,576 rows)", Engine: prefix + name}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				r.Seconds = v / 1e9
			case "rows/s":
				r.RowsPerSec = v
			case "MB/s":
				r.MBPerSec = v
			case "cpu-ms/op":
				r.CPUSeconds = v / 1000
			}
		}
		if name == "BenchmarkSnapshotLoad10000Commits" {
			r.Case = "go test -bench ./delta (snapshot load)"
			r.Note = "10,000 commits, checkpoints every 10; seconds per load"
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (d *driver) find(casePrefix, enginePrefix string) *row {
	for _, r := range d.res.Rows {
		if strings.HasPrefix(r.Case, casePrefix) && strings.HasPrefix(r.Engine, enginePrefix) && r.Error == "" && r.Seconds > 0 {
			return r
		}
	}
	return nil
}

// unfinished returns a row of the case and engine stopped by -case-timeout.
func (d *driver) unfinished(casePrefix, enginePrefix string) *row {
	for _, r := range d.res.Rows {
		if strings.HasPrefix(r.Case, casePrefix) && strings.HasPrefix(r.Engine, enginePrefix) && strings.Contains(r.Error, "did not finish") {
			return r
		}
	}
	return nil
}

// targets checks the targets (bench/README.md) against this run's rows.
func (d *driver) targets() []target {
	var ts targetList
	d.ingestTargets(&ts)
	d.mergeTargets(&ts)
	d.changeFeedTargets(&ts)
	d.scd2Targets(&ts)
	d.snapshotTargets(&ts)
	d.logloadTargets(&ts)
	d.factsTargets(&ts)
	ts = append(ts, d.extractTargets()...)
	d.goTestTargets(&ts)
	d.baselineTargets(&ts)
	return ts
}

// sizeCaveat says, for a run at -size small, that the targets are stated for -size
// full: at a tenth of the rows a peer's fixed costs weigh differently, and a NO there
// is not a NO at the stated size.
func (d *driver) sizeCaveat() string {
	if d.cfg.size != "small" {
		return ""
	}
	return "The targets are stated for -size full; this run is -size small, so its comparisons are indicative only."
}

// baselineTargets checks each of our runs against the -baseline build's run of the same
// case (the row after it, named for the baseline): not slower, allowing 5% for noise.
func (d *driver) baselineTargets(ts *targetList) {
	for i, r := range d.res.Rows {
		if i == 0 || !r.OfBaseline {
			continue
		}
		ours := d.res.Rows[i-1]
		base, _, _ := strings.Cut(r.Engine, ":")
		text := fmt.Sprintf("%s, %s: not slower than %s (5%% allowed for noise)", r.Case, ours.Engine, base)
		switch {
		case ours.Error != "" || r.Error != "" || ours.Seconds == 0 || r.Seconds == 0:
			ts.add(text, false, false, "")
		default:
			ts.add(text, ours.Seconds <= 1.05*r.Seconds, true,
				fmt.Sprintf("%.3fs vs %.3fs (%.2f×)%s", ours.Seconds, r.Seconds, r.Seconds/ours.Seconds, peaks(ours, r)))
		}
	}
}

// targetList is the targets a run checked, in the order of the report.
type targetList []target

// add records a target: met when known (the cases it compares ran) and ok, "n/a" when
// not known.
func (ts *targetList) add(text string, ok bool, known bool, got string) {
	met := "n/a"
	switch {
	case known && ok:
		met = "yes"
	case known:
		met = "NO"
	}
	*ts = append(*ts, target{text, got, met})
}

// ingestTargets checks the CSV ingest against DuckDB, and its peak RSS.
func (d *driver) ingestTargets(ts *targetList) {
	ours, duck := d.find("ingest", "ours"), d.find("ingest", "DuckDB")
	if ours == nil && duck == nil {
		return
	}
	known := ours != nil && duck != nil
	got := ""
	if known {
		got = fmt.Sprintf("%.2f× (%s vs %s rows/s); by CPU seconds %s", ours.RowsPerSec/duck.RowsPerSec, rate(ours.RowsPerSec), rate(duck.RowsPerSec), cpuRatio(duck, ours))
	}
	ts.add("ingest ≥ 0.7× DuckDB rows/s", known && ours.RowsPerSec >= 0.7*duck.RowsPerSec, known, got)
	if drs := d.find("ingest", "delta-rs"); ours != nil && drs != nil {
		ts.add("ingest ≥ 1.0× delta-rs rows/s", ours.RowsPerSec >= drs.RowsPerSec, true,
			fmt.Sprintf("%.2f× (%s vs %s rows/s)", ours.RowsPerSec/drs.RowsPerSec, rate(ours.RowsPerSec), rate(drs.RowsPerSec)))
		ts.add("ingest peak RSS ≤ 1/3 of delta-rs's", 3*ours.PeakRSSMB <= drs.PeakRSSMB, true,
			fmt.Sprintf("%.0f vs %.0f MB (%.2f)", ours.PeakRSSMB, drs.PeakRSSMB, ours.PeakRSSMB/drs.PeakRSSMB))
	}
	if ours != nil && ours.Seconds > 0 {
		busy := ours.CPUSeconds / ours.Seconds
		ts.add("ingest keeps both cores busy: CPU seconds / wall ≥ 1.8", busy >= 1.8, true,
			fmt.Sprintf("%.2f (%.1f CPU s in %.2fs)", busy, ours.CPUSeconds, ours.Seconds))
	}
	if ours != nil {
		text := fmt.Sprintf("ingest peak RSS ≤ %d MB (stated at 10 M rows; this run: %s)", boundIngestMB, commas(d.cfg.ingestRows))
		ts.add(text, ours.PeakRSSMB <= boundIngestMB, true, fmt.Sprintf("%.0f MB", ours.PeakRSSMB))
		if mb := d.res.Sizes["ingest_csv_mb"]; mb >= 1073 { // 1 GiB
			ts.add(fmt.Sprintf("ingest of 1 GiB of CSV (this run: %d MB) with peak RSS ≤ %d MB", mb, boundIngestMB),
				ours.PeakRSSMB <= boundIngestMB, true, fmt.Sprintf("%.0f MB", ours.PeakRSSMB))
		}
	}
}

// mergeTargets checks MERGE against delta-rs with the changes in 10% of the files and in
// all of them, and the clustered case against the spread one.
func (d *driver) mergeTargets(ts *targetList) {
	var clustered, spread *row
	for _, layout := range []string{"10%", "all"} {
		var ours, drs *row
		for _, r := range d.res.Rows {
			if strings.HasPrefix(r.Case, "MERGE") && strings.Contains(r.Case, "in "+layout) && r.Error == "" {
				switch {
				case strings.HasPrefix(r.Engine, "ours"):
					ours = r
				case strings.HasPrefix(r.Engine, "delta-rs"):
					drs = r
				}
			}
		}
		if layout == "10%" {
			clustered = ours
		} else {
			spread = ours
		}
		if ours == nil && drs == nil {
			continue
		}
		known := ours != nil && drs != nil
		got := ""
		if known {
			got = fmt.Sprintf("ours %.2fs vs delta-rs %.2fs (%.2f× as fast); by CPU seconds %s", ours.Seconds, drs.Seconds, drs.Seconds/ours.Seconds, cpuRatio(drs, ours))
		}
		ts.add("MERGE faster than delta-rs, changes in "+layout+" files", known && ours.Seconds < drs.Seconds, known, got)
	}
	if clustered != nil || spread != nil {
		known := clustered != nil && spread != nil
		got := ""
		if known {
			got = fmt.Sprintf("%.2f× (%.2fs vs %.2fs); by CPU seconds %.2f×", clustered.Seconds/spread.Seconds, clustered.Seconds, spread.Seconds, clustered.CPUSeconds/spread.CPUSeconds)
		}
		ts.add("MERGE with changes in 10% of files ≤ 0.3× the spread case's time", known && clustered.Seconds <= 0.3*spread.Seconds, known, got)
	}
}

// changeFeedTargets checks the change feed read against the plain scan.
func (d *driver) changeFeedTargets(ts *targetList) {
	ch, scan := d.find("change feed", "ours: Table.Changes"), d.find("change feed", "ours: Snapshot.Scan")
	if ch == nil && scan == nil {
		return
	}
	known := ch != nil && scan != nil
	got := ""
	if known {
		got = fmt.Sprintf("%.2f× (%s vs %s rows/s); by CPU seconds %s", ch.RowsPerSec/scan.RowsPerSec, rate(ch.RowsPerSec), rate(scan.RowsPerSec), cpuRatio(scan, ch))
	}
	ts.add("change feed read ≥ 0.8× the plain scan", known && ch.RowsPerSec >= 0.8*scan.RowsPerSec, known, got)
	if drs := d.find("change feed", "delta-rs load_cdf"); ch != nil && drs != nil {
		ts.add("change feed read ≥ 1.0× delta-rs load_cdf", ch.RowsPerSec >= drs.RowsPerSec, true,
			fmt.Sprintf("%.2f× (%s vs %s rows/s)", ch.RowsPerSec/drs.RowsPerSec, rate(ch.RowsPerSec), rate(drs.RowsPerSec)))
	}
}

// scd2Targets checks the SCD2 stage (with the dimension's files spliced, and with
// deletion vectors) against DuckDB and delta-rs, and its peak RSS on a large dimension.
func (d *driver) scd2Targets(ts *targetList) {
	// Ours without deletion vectors (the dimension's file spliced), then ours with them (its engine
	// name extends the first).
	for _, o := range []struct{ label, engine string }{{"", "ours: scd2_merge stage"}, {" (deletion vectors)", "ours: scd2_merge stage, deletion vectors"}} {
		ours := d.find("SCD2", o.engine)
		if o.label == "" && ours != nil && ours.Engine != o.engine {
			ours = nil // only the deletion vector row ran
		}
		if ours == nil && d.find("SCD2", "") == nil {
			continue
		}
		duck, drs := d.find("SCD2", "DuckDB"), d.find("SCD2", "delta-rs")
		slow := d.unfinished("SCD2", o.engine) // stopped by -case-timeout: slower than any finished peer
		for _, p := range []struct {
			text string
			peer *row
			name string
		}{{"SCD2 not slower than DuckDB" + o.label, duck, "DuckDB"}, {"SCD2 faster than delta-rs" + o.label, drs, "delta-rs"}} {
			switch {
			case ours != nil && p.peer != nil:
				ts.add(p.text, ours.Seconds < p.peer.Seconds || (p.name == "DuckDB" && ours.Seconds == p.peer.Seconds), true,
					fmt.Sprintf("ours %.2fs vs %s %.2fs; by CPU seconds %s", ours.Seconds, p.name, p.peer.Seconds, cpuRatio(p.peer, ours)))
			case slow != nil && p.peer != nil:
				ts.add(p.text, false, true, fmt.Sprintf("ours %s; %s %.2fs", slow.Error, p.name, p.peer.Seconds))
			default:
				ts.add(p.text, false, false, "")
			}
		}
	}
	if d.cfg.scd2Rows >= 5_000_000 {
		for _, engine := range []string{"ours: scd2_merge stage", "ours: scd2_merge stage, deletion vectors"} {
			if ours := d.find("SCD2", engine); ours != nil && ours.Engine == engine {
				ts.add(fmt.Sprintf("%s: SCD2 of a whole snapshot into a %s-row dimension with peak RSS ≤ %d MB", engine, commas(d.cfg.scd2Rows), boundSCD2MB),
					ours.PeakRSSMB <= boundSCD2MB, true, fmt.Sprintf("%.0f MB", ours.PeakRSSMB))
			}
		}
	}
}

// snapshotTargets checks the snapshot ingest against DuckDB's diff: ours without deletion
// vectors (the changed files rewritten), then with them.
func (d *driver) snapshotTargets(ts *targetList) {
	duck := d.find("snapshot", "DuckDB")
	for _, o := range []struct{ label, engine string }{{"", "ours: ingest stage, mode snapshot"}, {" (deletion vectors)", "ours: ingest stage, mode snapshot, deletion vectors"}} {
		ours := d.find("snapshot", o.engine)
		if ours != nil && ours.Engine != o.engine {
			ours = nil // a row whose name has this one's as a prefix
		}
		if ours == nil && duck == nil {
			continue
		}
		known := ours != nil && duck != nil
		got := ""
		if known {
			got = fmt.Sprintf("ours %.2fs vs DuckDB %.2fs; by CPU seconds %s; peak RSS %.0f vs %.0f MB", ours.Seconds, duck.Seconds, cpuRatio(duck, ours), ours.PeakRSSMB, duck.PeakRSSMB)
		}
		ts.add("snapshot ingest not slower than DuckDB's diff"+o.label, known && ours.Seconds <= duck.Seconds, known, got)
	}
	// Over a budget (-snapshot-budget): in passes over spill files, at most 1.5× the time
	// in memory.
	if over, mem := d.find("snapshot", "ours: ingest stage, mode snapshot, memory budget"), d.find("snapshot", "ours: ingest stage, mode snapshot"); over != nil && mem != nil && mem != over {
		passes := strings.Contains(over.Note, "passes over spill files")
		ratio := over.Seconds / mem.Seconds
		ts.add("snapshot ingest over its budget ≤ 1.5× its time in memory", passes && ratio <= 1.5, true,
			fmt.Sprintf("over spill files: %v; %.2f× (%.2fs vs %.2fs; CPU %.1fs vs %.1fs; peak RSS %.0f vs %.0f MB)", passes, ratio, over.Seconds, mem.Seconds, over.CPUSeconds, mem.CPUSeconds, over.PeakRSSMB, mem.PeakRSSMB))
	}
}

// factsTargets checks the fact_load stage's first load against DuckDB's ASOF JOIN and range
// join (time, and peak RSS against the ASOF JOIN's), and the re-keying run after a late event
// on 1% of the keys against the first load: in proportion to the facts affected, read here as
// at most 10% of the first load's time (1% of the facts, with room for the fixed costs).
func (d *driver) factsTargets(ts *targetList) {
	ours := d.find("facts: first load", "ours")
	asof, rng := d.find("facts: first load", "DuckDB ASOF"), d.find("facts: first load", "DuckDB range")
	if ours == nil && asof == nil && rng == nil {
		return
	}
	for _, p := range []struct {
		name string
		peer *row
	}{{"DuckDB ASOF JOIN", asof}, {"DuckDB range join", rng}} {
		known := ours != nil && p.peer != nil
		got := ""
		if known {
			got = fmt.Sprintf("ours %.2fs vs %s %.2fs; by CPU seconds %s", ours.Seconds, p.name, p.peer.Seconds, cpuRatio(p.peer, ours))
		}
		ts.add("fact_load first load faster than "+p.name, known && ours.Seconds < p.peer.Seconds, known, got)
	}
	known := ours != nil && asof != nil
	got := ""
	if known {
		got = fmt.Sprintf("%.0f vs %.0f MB", ours.PeakRSSMB, asof.PeakRSSMB)
	}
	ts.add("fact_load first load peak RSS ≤ DuckDB ASOF JOIN's", known && ours.PeakRSSMB <= asof.PeakRSSMB, known, got)
	for _, c := range []struct{ prefix, layout string }{
		{"facts: re-keying after a late event", ""},
		{"facts: re-keying after the same late event", ", the facts in time order"},
	} {
		re := d.find(c.prefix, "ours")
		known = ours != nil && re != nil
		got = ""
		if known {
			got = fmt.Sprintf("%.1f%% (%.2fs vs %.2fs)", 100*re.Seconds/ours.Seconds, re.Seconds, ours.Seconds)
		}
		ts.add("fact_load re-keying after a late event on 1% of keys"+c.layout+" ≤ 10% of the first load's time", known && re.Seconds <= 0.1*ours.Seconds, known, got)
	}
}

// logloadTargets checks the snapshot load of a wide table against delta-rs, per layout.
func (d *driver) logloadTargets(ts *targetList) {
	for _, l := range []string{"v2 checkpoint with sidecars", "classic checkpoint"} {
		ours, drs := d.find("snapshot load", "ours: Open (latest snapshot), "+l), d.find("snapshot load", "delta-rs DeltaTable + file_uris, "+l)
		if ours == nil && drs == nil {
			continue
		}
		known := ours != nil && drs != nil
		got := ""
		if known {
			got = fmt.Sprintf("ours %.3fs vs delta-rs %.3fs; by CPU seconds %s; peak RSS %.0f vs %.0f MB", ours.Seconds, drs.Seconds, cpuRatio(drs, ours), ours.PeakRSSMB, drs.PeakRSSMB)
		}
		ts.add("snapshot load ("+l+") not slower than delta-rs", known && ours.Seconds <= drs.Seconds, known, got)
	}
}

// goTestTargets checks the go test benchmarks: append against plain pqarrow, and the
// snapshot load of 10,000 commits.
func (d *driver) goTestTargets(ts *targetList) {
	if app, plain := d.find("go test", "BenchmarkAppend"), d.find("go test", "BenchmarkPlainPqarrow"); app != nil || plain != nil {
		known := app != nil && plain != nil && app.RowsPerSec > 0 && plain.RowsPerSec > 0
		got := ""
		if known {
			got = fmt.Sprintf("%.2f× (%s vs %s rows/s)", app.RowsPerSec/plain.RowsPerSec, rate(app.RowsPerSec), rate(plain.RowsPerSec))
		}
		ts.add("append ≥ 0.9× plain pqarrow", known && app.RowsPerSec >= 0.9*plain.RowsPerSec, known, got)
	}
	if sl := d.find("go test", "BenchmarkSnapshotLoad"); sl != nil {
		ts.add("snapshot load of 10,000 commits < 1 s", sl.Seconds < 1, true, fmt.Sprintf("%.3fs", sl.Seconds))
	}
}

// extractTargets checks the memory budget's targets on the extract case: a batch of 20 M
// rows (or more) into a dimension of as many under 1.5 GB peak RSS, at no more than 1.3×
// the per-row time of the smallest size run.
func (d *driver) extractTargets() []target {
	var small, large *row
	var smallN, largeN int
	for _, r := range d.res.Rows {
		var n, batch int
		if r.Error != "" || !strings.HasPrefix(r.Engine, "ours") || r.Rows == 0 {
			continue
		}
		if _, err := fmt.Sscanf(strings.ReplaceAll(r.Case, ",", ""), "extract: batch of %d rows into a %d-row dimension", &batch, &n); err != nil {
			continue
		}
		if small == nil || n < smallN {
			small, smallN = r, n
		}
		if large == nil || n > largeN {
			large, largeN = r, n
		}
	}
	var ts []target
	// Each size's merge against DuckDB's SQL SCD2 on the same data: in memory (within
	// the default budget) and at least 1.5× as fast.
	for _, r := range d.res.Rows {
		var n, batch int
		if r.Error != "" || !strings.HasPrefix(r.Engine, "ours") || r.OfBaseline {
			continue
		}
		if _, err := fmt.Sscanf(strings.ReplaceAll(r.Case, ",", ""), "extract: batch of %d rows into a %d-row dimension", &batch, &n); err != nil {
			continue
		}
		duck := d.find(r.Case, "DuckDB")
		if duck == nil || duck.Error != "" || r.Seconds == 0 {
			continue
		}
		inMemory := !strings.Contains(r.Note, "passes over spill files")
		ratio := duck.Seconds / r.Seconds
		ts = append(ts, target{Target: fmt.Sprintf("extract of %s rows into a %s-row dimension: in memory, ≥ 1.5× DuckDB's SQL SCD2", commas(batch), commas(n)),
			Got: fmt.Sprintf("in memory: %v; %.2f× (%.2fs vs %.2fs; CPU %.1fs vs %.1fs)", inMemory, ratio, r.Seconds, duck.Seconds, r.CPUSeconds, duck.CPUSeconds),
			Met: yesNo(inMemory && ratio >= 1.5)})
	}
	if large == nil || largeN < 20_000_000 {
		return ts
	}
	ts = append(ts, []target{{Target: fmt.Sprintf("extract of %s rows into a %s-row dimension with peak RSS ≤ 1.5 GB (%d MiB)", commas(int(large.Rows)), commas(largeN), boundExtractMiB),
		Got: fmt.Sprintf("%.0f MiB", large.PeakRSSMB), Met: yesNo(large.PeakRSSMB <= boundExtractMiB)}}...)
	if small != nil && small != large {
		per := func(r *row) float64 { return r.Seconds / float64(r.Rows) * 1e9 }
		ratio := per(large) / per(small)
		ts = append(ts, target{Target: fmt.Sprintf("its per-row time ≤ 1.3× that of the %s-row extract", commas(smallN)),
			Got: fmt.Sprintf("%.2f× (%.0f vs %.0f ns/row)", ratio, per(large), per(small)), Met: yesNo(ratio <= 1.3)})
	}
	return ts
}

// peaks says two runs' peak RSS, when measured (go benchmarks are not).
func peaks(a, b *row) string {
	if a.PeakRSSMB == 0 || b.PeakRSSMB == 0 {
		return ""
	}
	return fmt.Sprintf("; peak RSS %.0f vs %.0f MB", a.PeakRSSMB, b.PeakRSSMB)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// boundExtractMiB is 1.5 GB in MiB (ru_maxrss is reported in KiB).
const boundExtractMiB = 1430

// The peak RSS bounds that docs/guarantees.md states, at -size bounds.
const (
	boundIngestMB = 320  // a CSV ingest of any size (10 M rows, 1 GiB)
	boundSCD2MB   = 2048 // an SCD2 merge of a 5 M-row snapshot into a 5 M-row dimension
)

// cpuRatio is how many times fewer CPU seconds ours used in the measured step than the
// peer did: >1 means ours used less.
func cpuRatio(peer, ours *row) string {
	if ours.CPUSeconds == 0 || peer.CPUSeconds == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f× as efficient (%.1f vs %.1f CPU s)", peer.CPUSeconds/ours.CPUSeconds, ours.CPUSeconds, peer.CPUSeconds)
}

func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func num(v float64, format string) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}

// report prints the table and writes results/<time>-<size>.json and .md.
func (d *driver) report(stdout io.Writer) error {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		d.res.Host["loadavg_at_end"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	md := d.markdown()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tengine\trows\tseconds\trows/s\tMB/s\tpeak RSS MB\tCPU s\tratio\t")
	last := ""
	for _, r := range d.res.Rows {
		c := r.Case
		if c == last {
			c = ""
		}
		last = r.Case
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\tFAILED: %s\t\t\t\t\t\t\t\n", c, r.Engine, r.Error)
			continue
		}
		ratio := ""
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, r.Engine, num(float64(r.Rows), "%.0f"), num(r.Seconds, "%.3f"),
			num(r.RowsPerSec, "%.0f"), num(r.MBPerSec, "%.1f"), num(r.PeakRSSMB, "%.0f"), num(r.CPUSeconds, "%.1f"), ratio)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nratio: rows/s relative to the case's first engine (ingest: DuckDB; MERGE: delta-rs; change feed: our plain scan; SCD2: DuckDB; go bench: plain pqarrow)")
	fmt.Fprintln(stdout, "\ntargets:")
	if c := d.sizeCaveat(); c != "" {
		fmt.Fprintln(stdout, "  "+c)
	}
	for _, t := range d.res.Targets {
		fmt.Fprintf(stdout, "  [%s] %s: %s\n", t.Met, t.Target, t.Got)
	}
	out := d.cfg.out
	if out == "" {
		out = filepath.Join(d.root, "bench", "results")
	}
	if err := os.MkdirAll(out, 0o777); err != nil {
		return err
	}
	base := freeBase(filepath.Join(out, d.res.Started.Format("2006-01-02T1504Z")+"-"+d.cfg.size))
	if err := d.write(base, md); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s.json and %s.md\n", base, base)
	return nil
}

// freeBase is base, or base-2, base-3, ... when a run started in the same minute wrote
// base's files already: a run never overwrites another's results.
func freeBase(base string) string {
	taken := func(b string) bool {
		_, errJSON := os.Stat(b + ".json")
		_, errMD := os.Stat(b + ".md")
		return errJSON == nil || errMD == nil
	}
	for i, b := 2, base; ; i++ {
		if !taken(b) {
			return b
		}
		b = fmt.Sprintf("%s-%d", base, i)
	}
}

// write writes base.json and base.md.
func (d *driver) write(base, md string) error {
	js, err := json.MarshalIndent(d.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o666); err != nil {
		return err
	}
	return os.WriteFile(base+".md", []byte(md), 0o666)
}

// render recomputes the targets and the Markdown of a results JSON file (after a change
// to how targets are judged) and rewrites it and its .md in place.
func render(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := &driver{cfg: &config{}, res: &results{}}
	if err := json.Unmarshal(b, d.res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	base := strings.TrimSuffix(path, ".json")
	d.cfg.size = d.res.Size
	if d.cfg.size == "" {
		d.cfg.size = base[strings.LastIndex(base, "-")+1:]
	}
	d.cfg.ingestRows = d.res.Sizes["ingest_rows"]
	d.res.Targets = d.targets()
	return d.write(base, d.markdown())
}

func (d *driver) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark run %s (-size %s)\n\n", d.res.Started.Format(time.RFC3339), d.cfg.size)
	fmt.Fprintf(&b, "Machine: %s CPUs (%s), %s memory, %s/%s, %s. Load average at start %s, at end %s.\n",
		d.res.Host["cpus"], d.res.Host["cpu"], d.res.Host["memory"], d.res.Host["goos"], d.res.Host["goarch"], d.res.Host["go"],
		d.res.Host["loadavg_at_start"], d.res.Host["loadavg_at_end"])
	if g := d.res.Host["git"]; g != "" {
		fmt.Fprintf(&b, "Code: %s (git describe --always --dirty of the working tree).\n", g)
	}
	if n := d.res.Host["note"]; n != "" {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	fmt.Fprintf(&b, "\nSizes: %v. Run took %s.\n\n", d.res.Sizes, d.res.Duration)
	b.WriteString("| case | engine | rows | seconds | rows/s | MB/s | peak RSS MB | CPU s | ratio | note |\n|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range d.res.Rows {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | %s | FAILED: %s | | | | | | | |\n", r.Case, r.Engine, r.Error)
			continue
		}
		ratio := ""
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.Baseline)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Case, r.Engine, num(float64(r.Rows), "%.0f"),
			num(r.Seconds, "%.3f"), num(r.RowsPerSec, "%.0f"), num(r.MBPerSec, "%.1f"), num(r.PeakRSSMB, "%.0f"),
			num(r.CPUSeconds, "%.1f"), ratio, strings.ReplaceAll(r.Note, "|", "/"))
	}
	b.WriteString("\n## Targets\n\n")
	if c := d.sizeCaveat(); c != "" {
		b.WriteString(c + "\n\n")
	}
	b.WriteString("| target | this run | met |\n|---|---|---|\n")
	for _, t := range d.res.Targets {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Target, t.Got, t.Met)
	}
	return b.String()
}
