package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// row is one engine's measurement in one case.
type row struct {
	Case       string  `json:"case"`
	Engine     string  `json:"engine"`
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// MBPerSec is input MB/s: the CSV files (ingest) or the table's Parquet (change feed).
	MBPerSec   float64 `json:"mb_per_sec,omitempty"`
	PeakRSSMB  float64 `json:"peak_rss_mb"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// Ratio is RowsPerSec relative to the case's baseline engine (>1: faster than it).
	Ratio    float64 `json:"ratio,omitempty"`
	Baseline string  `json:"baseline,omitempty"`
	Note     string  `json:"note,omitempty"`
	Error    string  `json:"error,omitempty"`
	// OfBaseline marks a run of the -baseline build (the row before it is ours).
	OfBaseline bool `json:"of_baseline,omitempty"`
}

// target is one target of bench/README.md and whether this run met it.
type target struct {
	Target string `json:"target"`
	Got    string `json:"got"`
	Met    string `json:"met"` // "yes", "NO", or "n/a" (a case was missing)
}

type results struct {
	Started  time.Time         `json:"started"`
	Size     string            `json:"size,omitempty"`
	Host     map[string]string `json:"host"`
	Sizes    map[string]int    `json:"sizes"`
	Rows     []*row            `json:"rows"`
	Targets  []target          `json:"targets"`
	Duration string            `json:"duration"`
}

type driver struct {
	cfg    *config
	root   string // repository root
	work   string
	python string
	self   string
	stderr io.Writer
	res    *results
}

func drive(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d := &driver{cfg: c, root: root, self: self, stderr: stderr, res: &results{Started: time.Now().UTC(), Size: c.size}}
	d.res.Host = hostInfo(c.note)
	// The code measured: the working tree's commit, "-dirty" if it had uncommitted changes.
	if b, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		d.res.Host["git"] = strings.TrimSpace(string(b))
	}
	d.res.Sizes = map[string]int{"ingest_rows": c.ingestRows, "merge_rows": c.mergeRows, "merge_files": c.mergeFiles,
		"merge_changes": c.mergeChanges, "cdf_rows": c.cdfRows, "scd2_rows": c.scd2Rows, "logload_files": c.logloadFiles}
	if strings.Contains(c.cases, "facts") {
		d.res.Sizes["fact_rows"], d.res.Sizes["fact_keys"] = c.factRows, c.factKeys
	}
	d.work = c.work
	if d.work == "" {
		if d.work, err = os.MkdirTemp("", "benchrun-"); err != nil {
			return err
		}
		if !c.keep {
			defer os.RemoveAll(d.work)
		}
	}
	d.logf("work directory %s", d.work)
	cases := map[string]bool{}
	for _, name := range strings.Split(c.cases, ",") {
		cases[strings.TrimSpace(name)] = true
	}
	if !c.oursOnly && (cases["ingest"] || cases["merge"] || cases["cdf"] || cases["scd2"] || cases["snapshot"] || cases["extract"] || cases["logload"] || cases["facts"]) {
		if d.python, err = d.pythonPath(ctx); err != nil {
			return err
		}
		d.logf("peers run with %s", d.python)
	}
	for _, cs := range []struct {
		name string
		fn   func(context.Context) error
	}{{"ingest", d.ingest}, {"merge", d.merge}, {"cdf", d.cdf}, {"scd2", d.scd2}, {"snapshot", d.snapshot}, {"logload", d.logload}, {"extract", d.extract}, {"facts", d.facts}, {"gobench", d.gobench}} {
		if !cases[cs.name] {
			continue
		}
		if err := cs.fn(ctx); err != nil {
			return fmt.Errorf("case %s: %w", cs.name, err)
		}
	}
	d.res.Duration = time.Since(d.res.Started).Round(time.Second).String()
	d.res.Targets = d.targets()
	return d.report(stdout)
}

func (d *driver) logf(format string, a ...any) {
	fmt.Fprintf(d.stderr, "%s benchrun: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// repoRoot finds the module root (the directory with this repository's go.mod).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/orchestrator-io/orchestrator\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run benchrun inside the orchestrator repository (no go.mod of github.com/orchestrator-io/orchestrator above %s)", dir)
		}
		dir = parent
	}
}

// pythonPath returns the Python that has the pinned peers: -python, or the interop
// virtualenv keyed exactly as scripts/test.sh keys it (requirements + Python version),
// created the same way when missing.
func (d *driver) pythonPath(ctx context.Context) (string, error) {
	if d.cfg.python != "" {
		return d.cfg.python, nil
	}
	base := os.Getenv("ORCH_INTEROP_PYTHON")
	if base == "" {
		base = "python3"
	}
	req, err := os.ReadFile(filepath.Join(d.root, "interop", "requirements.txt"))
	if err != nil {
		return "", err
	}
	ver, err := exec.CommandContext(ctx, base, "-c", "import sys; print(sys.version)").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w (need Python 3.10+, or pass -python)", base, err)
	}
	sum := sha256.Sum256(append(req, ver...))
	cache := os.Getenv("ORCH_CACHE_DIR")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "orchestrator")
	}
	venv := filepath.Join(cache, "interop-venv-"+hex.EncodeToString(sum[:])[:16])
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(filepath.Join(venv, ".complete")); err == nil {
		return py, nil
	}
	d.logf("creating virtualenv %s (pip install -r interop/requirements.txt)", venv)
	os.RemoveAll(venv)
	if err := os.MkdirAll(cache, 0o777); err != nil {
		return "", err
	}
	for _, argv := range [][]string{
		{base, "-m", "venv", venv},
		{py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", filepath.Join(d.root, "interop", "requirements.txt")},
	} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
		if err := cmd.Run(); err != nil {
			os.RemoveAll(venv)
			return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	return py, os.WriteFile(filepath.Join(venv, ".complete"), nil, 0o666)
}

// ours runs a Go worker case in a child process; see child for prep. With -baseline, an
// engine named "ours..." runs again right after with the baseline build, on the same data
// (not a one-off run, whose prep is nil).
func (d *driver) ours(ctx context.Context, caseName, engine string, prep func() error, args ...string) *row {
	runs := []engineRun{{engine: engine, argv: append([]string{d.self, "-worker"}, args...)}}
	if prep != nil {
		runs = d.oursRuns(engine, args...)
	}
	return d.alternate(ctx, caseName, prep, runs)[0]
}

// oursRuns are the runs of a Go worker case: ours, and with -baseline (for an engine
// named "ours...") the baseline build's after it.
func (d *driver) oursRuns(engine string, args ...string) []engineRun {
	runs := []engineRun{{engine: engine, argv: append([]string{d.self, "-worker"}, args...)}}
	if d.cfg.baseline != "" && strings.HasPrefix(engine, "ours") {
		runs = append(runs, engineRun{engine: d.cfg.baselineName + strings.TrimPrefix(engine, "ours"),
			argv: append([]string{d.cfg.baseline, "-worker"}, args...), baseline: true})
	}
	return runs
}

// peerArgv is the command that runs a case of bench/peers.py.
func (d *driver) peerArgv(args ...string) []string {
	return append([]string{d.python, filepath.Join(d.root, "bench", "peers.py")}, args...)
}

// peer runs a case of bench/peers.py in a child process; see child for prep.
func (d *driver) peer(ctx context.Context, caseName, engine string, prep func() error, args ...string) *row {
	if d.cfg.oursOnly {
		return nil
	}
	return d.child(ctx, caseName, engine, prep, d.peerArgv(args...))
}

// noPrep marks a read-only run, repeatable as is.
func noPrep() error { return nil }

// engineRun is an engine of a case and the command that runs it once.
type engineRun struct {
	engine   string
	argv     []string
	baseline bool         // the -baseline build's run (its row is OfBaseline)
	prep     func() error // called before each of its runs instead of the case's prep
}

// peerRuns is the run of a case of bench/peers.py (none with -ours-only).
func (d *driver) peerRuns(engine string, args ...string) []engineRun {
	if d.cfg.oursOnly {
		return nil
	}
	return []engineRun{{engine: engine, argv: d.peerArgv(args...)}}
}

// withPrep sets prep as the prep of runs.
func withPrep(prep func() error, runs []engineRun) []engineRun {
	for i := range runs {
		runs[i].prep = prep
	}
	return runs
}

// caseRuns gathers the engines of a case whose runs alternate takes in turn.
type caseRuns struct{ runs []engineRun }

// add appends runs and returns the index of the first of them (-1: none, a peer with
// -ours-only), for rowOf.
func (c *caseRuns) add(runs []engineRun) int {
	if len(runs) == 0 {
		return -1
	}
	c.runs = append(c.runs, runs...)
	return len(c.runs) - len(runs)
}

// rowOf is the row of the engine add returned i for (nil for -1).
func rowOf(rows []*row, i int) *row {
	if i < 0 {
		return nil
	}
	return rows[i]
}

// child runs argv up to -repeat times (once if prep is nil, the run not being
// repeatable; no more after a run over 30 s), calling prep before each run, and records
// the fastest run. A failure is recorded in the row, not fatal.
func (d *driver) child(ctx context.Context, caseName, engine string, prep func() error, argv []string) *row {
	return d.alternate(ctx, caseName, prep, []engineRun{{engine: engine, argv: argv}})[0]
}

// alternate is child for several engines of a case (ours and the baseline build), their
// runs taken in turn (every other round in reverse order), so that a machine slowing
// down or speeding up during the case, and the run before, weigh on each alike. It
// records each engine's fastest run, in the order given.
func (d *driver) alternate(ctx context.Context, caseName string, prep func() error, runs []engineRun) []*row {
	n := d.cfg.repeat
	if prep == nil || n < 1 {
		n = 1
	}
	best := make([]*row, len(runs))
	count, peak, done := make([]int, len(runs)), make([]float64, len(runs)), make([]bool, len(runs))
	for i := 0; i < n; i++ {
		for k := range runs {
			// Every other round goes the other way: a run's place in the round (which run
			// comes before it) weighs on it (the same build, run after another's run in
			// memory or after a run over spill files, took 3.94-4.10 s or 3.19-3.56 s), so
			// each engine takes each place in turn.
			j := k
			if i%2 == 1 {
				j = len(runs) - 1 - k
			}
			er := runs[j]
			if done[j] {
				continue
			}
			p := prep
			if er.prep != nil {
				p = er.prep
			}
			if p != nil {
				if err := p(); err != nil {
					best[j], done[j] = &row{Case: caseName, Engine: er.engine, Error: "prepare: " + err.Error()}, true
					continue
				}
			}
			// Every run starts with nothing to write back: no engine's fsync (ours syncs
			// every file it publishes) waits for the generator's or an earlier run's pages.
			syscall.Sync()
			r := d.once(ctx, caseName, er.engine, er.argv)
			count[j]++
			peak[j] = max(peak[j], r.PeakRSSMB)
			switch {
			case r.Error != "" && best[j] == nil:
				best[j], done[j] = r, true
			case r.Error != "":
				best[j].Note = strings.TrimSpace(fmt.Sprintf("run %d of %d failed: %s; %s", count[j], n, r.Error, best[j].Note))
				done[j] = true
			case best[j] == nil || r.Seconds < best[j].Seconds:
				best[j] = r
			}
			if r.Seconds > 30 {
				done[j] = true
			}
		}
	}
	for j, b := range best {
		b.OfBaseline = runs[j].baseline
		if count[j] > 1 && b.Error == "" {
			b.PeakRSSMB = peak[j]
			var others []string
			for k, er := range runs {
				if k != j {
					others = append(others, er.engine)
				}
			}
			turns := ""
			if len(others) > 0 {
				turns = ", taken in turn with " + strings.Join(others, " and ")
			}
			b.Note = strings.TrimSpace(fmt.Sprintf("fastest of %d runs%s (peak RSS: the largest of them); %s", count[j], turns, b.Note))
		}
		d.res.Rows = append(d.res.Rows, b)
	}
	return best
}

// once runs argv, whose last stdout line is a measurement, and adds the child's peak
// RSS and CPU time from its rusage.
func (d *driver) once(ctx context.Context, caseName, engine string, argv []string) *row {
	r := &row{Case: caseName, Engine: engine}
	d.logf("%s / %s: %s", caseName, engine, strings.Join(argv[1:], " "))
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, d.cfg.caseTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, d.stderr
	err := cmd.Run()
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSSMB = float64(ru.Maxrss) / 1024 // KiB on Linux
			r.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
	}
	if err != nil {
		r.Error = err.Error()
		if ctx.Err() != nil {
			r.Error = fmt.Sprintf("did not finish within -case-timeout %s (stopped)", d.cfg.caseTimeout)
		}
		d.logf("%s / %s FAILED: %v", caseName, engine, err)
		return r
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var m measurement
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		r.Error = fmt.Sprintf("bad measurement %q: %v", lines[len(lines)-1], err)
		return r
	}
	r.Rows, r.Seconds, r.Note = m.Rows, m.Seconds, m.Note
	if m.CPUSeconds > 0 {
		r.CPUSeconds = m.CPUSeconds // the measured step's, not the whole process's
	}
	if m.Seconds > 0 {
		r.RowsPerSec = float64(m.Rows) / m.Seconds
	}
	d.logf("%s / %s: %d rows in %.2fs, peak RSS %.0f MB, CPU %.1fs", caseName, engine, r.Rows, r.Seconds, r.PeakRSSMB, r.CPUSeconds)
	return r
}

// setup runs a preparation step; its failure ends the case.
func (d *driver) setup(ctx context.Context, args ...string) error {
	d.logf("setup: %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.self, append([]string{"-worker"}, args...)...)
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
	return cmd.Run()
}

// relate fills Ratio (rows/s relative to base) for rows of a case.
func relate(base *row, rows ...*row) {
	if base == nil || base.RowsPerSec == 0 {
		return
	}
	for _, r := range rows {
		if r != nil && r.RowsPerSec > 0 {
			r.Ratio = r.RowsPerSec / base.RowsPerSec
			r.Baseline = base.Engine
		}
	}
}

func setMBps(bytes int64, rows ...*row) {
	for _, r := range rows {
		if r != nil && r.Seconds > 0 {
			r.MBPerSec = float64(bytes) / 1e6 / r.Seconds
		}
	}
}

func (d *driver) ingest(ctx context.Context) error {
	dir := filepath.Join(d.work, "ingest")
	csvDir := filepath.Join(dir, "csv")
	d.logf("ingest: generating %d CSV rows in %d files", d.cfg.ingestRows, ingestFiles)
	size, err := genIngest(csvDir, d.cfg.ingestRows)
	if err != nil {
		return err
	}
	d.logf("ingest: %.0f MB of CSV", float64(size)/1e6)
	d.res.Sizes["ingest_csv_mb"] = int(size / 1e6)
	c := fmt.Sprintf("ingest %s CSV rows", commas(d.cfg.ingestRows))
	out := func(name string) (string, func() error) {
		p := filepath.Join(dir, name)
		return p, func() error { return os.RemoveAll(p) }
	}
	// The engines' runs are taken in turn, each into its own emptied output.
	var cr caseRuns
	o, clean := out("duckdb")
	iDuck := cr.add(withPrep(clean, d.peerRuns("DuckDB COPY → Parquet", "ingest-duckdb", csvDir, o)))
	o, clean = out("ours")
	iOurs := cr.add(withPrep(clean, d.oursRuns("ours: ingest stage → Delta", "ingest-ours", csvDir, o)))
	iNaive := -1
	if !d.cfg.oursOnly {
		o, clean = out("arrowgo")
		iNaive = cr.add(withPrep(clean, []engineRun{{engine: "arrow-go csv → pqarrow, no log", argv: []string{d.self, "-worker", "ingest-arrowgo", csvDir, o}}}))
	}
	o, clean = out("deltars")
	iDrs := cr.add(withPrep(clean, d.peerRuns("delta-rs: pyarrow csv → write_deltalake", "ingest-deltars", csvDir, o)))
	all := d.alternate(ctx, c, noPrep, cr.runs)
	duck, ours, naive, drs := rowOf(all, iDuck), rowOf(all, iOurs), rowOf(all, iNaive), rowOf(all, iDrs)
	rows := []*row{duck, ours, naive, drs}
	if d.cfg.ingestS3 != "" {
		// One run (nil prep), into a new table under the given prefix.
		target := fmt.Sprintf("%s/ingest-%d", strings.TrimSuffix(d.cfg.ingestS3, "/"), time.Now().UnixNano())
		rows = append(rows, d.ours(ctx, c, "ours: ingest stage → Delta on S3", nil, "ingest-ours", csvDir, target))
	}
	setMBps(size, rows...)
	relate(duck, rows...)
	return os.RemoveAll(dir)
}

func (d *driver) merge(ctx context.Context) error {
	dir := filepath.Join(d.work, "merge")
	d.logf("merge: generating a %d-row target in %d files and %d changes per layout", d.cfg.mergeRows, d.cfg.mergeFiles, d.cfg.mergeChanges)
	if err := genDeltaTable(ctx, filepath.Join(dir, "target"), d.cfg.mergeRows, d.cfg.mergeFiles, nil); err != nil {
		return err
	}
	if err := genMergeSources(dir, d.cfg.mergeRows, d.cfg.mergeChanges); err != nil {
		return err
	}
	for _, layout := range []string{"clustered", "spread"} {
		c := fmt.Sprintf("MERGE %s into %s rows, %s", commas(d.cfg.mergeChanges), commas(d.cfg.mergeRows),
			map[string]string{"clustered": "changes in 10% of files", "spread": "changes in all files"}[layout])
		src := filepath.Join(dir, layout+".parquet")
		// Each engine's runs start from its own fresh copy of the target; their runs are
		// taken in turn.
		var cr caseRuns
		var tdirs []string
		for _, e := range []struct{ engine, kind string }{{"delta-rs merge", "deltars"}, {"ours: Table.Merge", "ours"}} {
			tdir := filepath.Join(dir, e.kind+"-"+layout)
			tdirs = append(tdirs, tdir)
			fresh := func() error {
				os.RemoveAll(tdir)
				return copyDir(filepath.Join(dir, "target"), tdir)
			}
			if e.kind == "ours" {
				cr.add(withPrep(fresh, d.oursRuns(e.engine, "merge-ours", tdir, src)))
			} else {
				cr.add(withPrep(fresh, d.peerRuns(e.engine, "merge-deltars", tdir, src)))
			}
		}
		rows := d.alternate(ctx, c, noPrep, cr.runs)
		for _, tdir := range tdirs {
			os.RemoveAll(tdir)
		}
		relate(rows[0], rows...)
	}
	return os.RemoveAll(dir)
}

func (d *driver) cdf(ctx context.Context) error {
	dir := filepath.Join(d.work, "cdf")
	tdir := filepath.Join(dir, "table")
	files := max(1, d.cfg.cdfRows/100_000)
	d.logf("cdf: generating a %d-row table in %d files, change data feed on", d.cfg.cdfRows, files)
	if err := genDeltaTable(ctx, tdir, d.cfg.cdfRows, files, delta.ChangeDataFeedProperties()); err != nil {
		return err
	}
	size, err := dirSize(tdir)
	if err != nil {
		return err
	}
	c := fmt.Sprintf("change feed read, %s rows (one insert version)", commas(d.cfg.cdfRows))
	var cr caseRuns
	iScan := cr.add(d.oursRuns("ours: Snapshot.Scan (plain scan)", "cdf-scan", tdir))
	iCh := cr.add(d.oursRuns("ours: Table.Changes", "cdf-changes", tdir))
	iDrs := cr.add(d.peerRuns("delta-rs load_cdf", "cdf-deltars", tdir))
	iDrsScan := cr.add(d.peerRuns("delta-rs to_pyarrow_dataset (plain scan)", "scan-deltars", tdir))
	all := d.alternate(ctx, c, noPrep, cr.runs)
	scan, ch, drs, drsScan := rowOf(all, iScan), rowOf(all, iCh), rowOf(all, iDrs), rowOf(all, iDrsScan)
	setMBps(size, scan, ch, drs, drsScan)
	relate(scan, scan, ch, drs, drsScan)
	return os.RemoveAll(dir)
}

func (d *driver) scd2(ctx context.Context) error {
	dir := filepath.Join(d.work, "scd2")
	n := d.cfg.scd2Rows
	if err := d.setup(ctx, "scd2-setup", dir, strconv.Itoa(n)); err != nil {
		return err
	}
	c := fmt.Sprintf("SCD2 batch of %s rows into a %s-row dimension", commas(n+n/100), commas(n))
	// Our run changes the dimension: with -repeat, each run starts from a copy of it as
	// set up, like DuckDB's, which only reads it. DuckDB's runs and ours are taken in turn.
	wh, setup := filepath.Join(dir, "wh"), filepath.Join(dir, "wh.setup")
	if err := copyDir(wh, setup); err != nil {
		return err
	}
	restore := func() error {
		if err := os.RemoveAll(wh); err != nil {
			return err
		}
		return copyDir(setup, wh)
	}
	var cr caseRuns
	iDuck := cr.add(withPrep(noPrep, d.peerRuns("DuckDB SQL over Parquet", "scd2-duckdb", dir)))
	iOurs := cr.add(d.oursRuns("ours: scd2_merge stage", "scd2-ours", dir, strconv.Itoa(n+n/100)))
	iDV := cr.add(d.oursRuns("ours: scd2_merge stage, deletion vectors", "scd2-ours", dir, strconv.Itoa(n+n/100), "dv"))
	all := d.alternate(ctx, c, restore, cr.runs)
	duck, ours, oursDV := rowOf(all, iDuck), rowOf(all, iOurs), rowOf(all, iDV)
	var drs *row
	if !d.cfg.oursOnly {
		// Once: delta-rs takes minutes.
		if err := d.peerSetup(ctx, "scd2-deltars-setup", dir); err != nil {
			return err
		}
		drs = d.peer(ctx, c, "delta-rs MERGE (staged union)", nil, "scd2-deltars", dir)
	}
	relate(duck, duck, drs, ours, oursDV)
	return os.RemoveAll(dir)
}

func (d *driver) peerSetup(ctx context.Context, args ...string) error {
	d.logf("setup: peers.py %s", strings.Join(args, " "))
	argv := d.peerArgv(args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
	return cmd.Run()
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(info.Name(), ".parquet") {
			n += info.Size()
		}
		return err
	})
	return n, err
}

func commas(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

func hostInfo(note string) map[string]string {
	h := map[string]string{
		"goos": runtime.GOOS, "goarch": runtime.GOARCH, "go": runtime.Version(),
		"cpus": strconv.Itoa(runtime.NumCPU()),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				h["cpu"] = strings.TrimSpace(l[strings.Index(l, ":")+1:])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		h["memory"] = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		h["loadavg_at_start"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if note != "" {
		h["note"] = note
	}
	return h
}
