// Command benchrun runs the side-by-side benchmarks of bench/README.md: it generates each
// case's data once, runs our code and the peers (DuckDB, delta-rs, arrow-go without a
// log) on it one after another, each in its own process so each has its own peak RSS,
// and prints one table of rows/s, MB/s, peak memory, CPU time and ratios, also written
// as JSON and Markdown to bench/results/.
//
//	go run ./bench/cmd/benchrun -size small
//	go run ./bench/cmd/benchrun -size full -note "2 cores, idle"
//
// It is never run by CI (scripts/test.sh only compiles it through go vet).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	size                               string
	cases                              string
	ingestRows, mergeRows, mergeFiles  int
	mergeChanges, cdfRows, scd2Rows    int
	snapshotRows                       int
	logloadFiles                       int
	factRows, factKeys                 int
	work, out, python, note, benchtime string
	ingestS3                           string
	keep, oursOnly                     bool
	caseTimeout                        time.Duration
	repeat                             int
	// The extract case: its sizes, our stage's memory budget ("": the default), and a
	// benchrun built from another tree to run it too, up to baselineMaxRows.
	extractRows     []int
	extractBudget   string
	snapshotBudget  string
	baseline        string
	baselineTree    string
	baselineName    string
	baselineMaxRows int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "-worker" {
		return runWorker(ctx, args[1:], stdout)
	}
	if len(args) == 2 && args[0] == "-render" {
		return render(args[1])
	}
	fl := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var c config
	fl.StringVar(&c.size, "size", "small", "preset sizes: small (minutes on 2 cores), full (the targets' sizes), bounds (ingest of 1 GiB of CSV and SCD2 into a 5 M-row dimension, ours only, for their peak RSS), or budget (the extract case at 1, 4 and 20 M rows, ours only, for the memory budget)")
	fl.StringVar(&c.cases, "cases", "ingest,merge,cdf,scd2,snapshot,logload,gobench", "comma-separated cases to run (extract, the memory budget's case, runs only when named or with -size budget; facts, keying facts as of their time, only when named)")
	fl.IntVar(&c.ingestRows, "ingest-rows", 0, "CSV rows for the ingest case (default: small 2,000,000, full 10,000,000)")
	fl.StringVar(&c.ingestS3, "ingest-s3", "", "also run our ingest into this S3 location (s3://bucket/prefix; endpoint and credentials from the AWS_* environment, e.g. a local MinIO), to measure it on S3")
	fl.IntVar(&c.mergeRows, "merge-rows", 0, "target rows for the MERGE case (default 1,000,000)")
	fl.IntVar(&c.mergeFiles, "merge-files", 100, "files of the MERGE target")
	fl.IntVar(&c.mergeChanges, "merge-changes", 0, "changed rows for the MERGE case (default 100,000)")
	fl.IntVar(&c.cdfRows, "cdf-rows", 0, "rows of the change feed case (default: small 1,000,000, full 5,000,000)")
	fl.IntVar(&c.scd2Rows, "scd2-rows", 0, "dimension rows for the SCD2 case (default: small 50,000, full 1,000,000)")
	fl.IntVar(&c.logloadFiles, "logload-files", 0, "files in the log of the snapshot load case (default 100,000 at every size)")
	fl.IntVar(&c.factRows, "fact-rows", 0, "facts of the facts case (default: small 1,000,000, full 10,000,000)")
	fl.IntVar(&c.factKeys, "fact-keys", 0, "dimension keys (3 versions each) of the facts case (default: small 100,000, full 1,000,000)")
	fl.IntVar(&c.snapshotRows, "snapshot-rows", 0, "table rows for the snapshot ingest case (default: small 100,000, full 1,000,000)")
	fl.StringVar(&c.work, "work", "", "directory for generated data (default: a new temporary directory, removed afterwards)")
	fl.BoolVar(&c.keep, "keep", false, "keep the work directory")
	fl.BoolVar(&c.oursOnly, "ours-only", false, "run only our engine, no peers (no Python needed)")
	fl.IntVar(&c.repeat, "repeat", 1, "run each engine up to this many times and keep the fastest (runs over 30 s, and delta-rs's SCD2 MERGE, are not repeated)")
	fl.DurationVar(&c.caseTimeout, "case-timeout", 20*time.Minute, "stop an engine's run after this long and report it as not finished")
	fl.StringVar(&c.out, "out", "", "results directory (default: bench/results in the repository)")
	fl.StringVar(&c.python, "python", "", "Python with the pinned peers (default: the interop virtualenv built from interop/requirements.txt, as scripts/test.sh does)")
	fl.StringVar(&c.note, "note", "", "machine and load note recorded with the results (e.g. \"2 cores, other builds running\")")
	fl.StringVar(&c.benchtime, "benchtime", "3x", "-benchtime for the go test benchmarks of case gobench")
	extractRows := fl.String("extract-rows", "", "comma-separated dimension sizes of the extract case (default: -size budget 1000000,4000000,20000000; else 1000000)")
	fl.StringVar(&c.extractBudget, "extract-budget", "", "memory_budget of our stage in the extract case (default: the stage's, 1GiB)")
	fl.StringVar(&c.snapshotBudget, "snapshot-budget", "", "also run our snapshot ingest with this memory_budget (e.g. 256MiB: its keys over it, in passes over spill files)")
	fl.StringVar(&c.baseline, "baseline", "", "a benchrun `binary` built from another tree (e.g. main) that runs each case of ours again, right after ours, on the same data")
	fl.StringVar(&c.baselineTree, "baseline-tree", "", "a source tree (e.g. a worktree of main) whose go test benchmarks of case gobench run too")
	fl.StringVar(&c.baselineName, "baseline-name", "main", "what the -baseline rows are called")
	fl.IntVar(&c.baselineMaxRows, "baseline-max-rows", 4_000_000, "the largest extract size the -baseline build runs (it may not fit in memory beyond)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	for _, v := range strings.Split(*extractRows, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("-extract-rows: %q is not a positive number", v)
		}
		c.extractRows = append(c.extractRows, n)
	}
	casesSet := false
	fl.Visit(func(f *flag.Flag) { casesSet = casesSet || f.Name == "cases" })
	if c.size == "bounds" {
		c.oursOnly = true
		if !casesSet {
			c.cases = "ingest,scd2"
		}
	}
	if c.size == "budget" {
		c.oursOnly = true
		if !casesSet {
			c.cases = "extract"
		}
	}
	if err := c.applySize(); err != nil {
		return err
	}
	return drive(ctx, &c, stdout, stderr)
}

func (c *config) applySize() error {
	def := func(p *int, small, full int) {
		if *p != 0 {
			return
		}
		if c.size == "full" {
			*p = full
		} else {
			*p = small
		}
	}
	if len(c.extractRows) == 0 {
		c.extractRows = []int{1_000_000}
		if c.size == "budget" {
			c.extractRows = []int{1_000_000, 4_000_000, 20_000_000}
		}
	}
	switch c.size {
	case "small", "full", "budget":
	case "bounds":
		// The resource bounds of docs/guarantees.md: 16 M rows are 1.1 GB of CSV.
		def(&c.ingestRows, 16_000_000, 16_000_000)
		def(&c.scd2Rows, 5_000_000, 5_000_000)
	default:
		return fmt.Errorf("-size %q: want small, full, bounds or budget", c.size)
	}
	def(&c.ingestRows, 2_000_000, 10_000_000)
	def(&c.mergeRows, 1_000_000, 1_000_000)
	def(&c.mergeChanges, 100_000, 100_000)
	def(&c.cdfRows, 1_000_000, 5_000_000)
	def(&c.scd2Rows, 50_000, 1_000_000)
	def(&c.snapshotRows, 100_000, 1_000_000)
	def(&c.logloadFiles, 100_000, 100_000)
	def(&c.factRows, 1_000_000, 10_000_000)
	def(&c.factKeys, 100_000, 1_000_000)
	if c.mergeRows%c.mergeFiles != 0 || c.mergeRows%c.mergeChanges != 0 || c.mergeChanges > c.mergeRows/10 {
		return fmt.Errorf("-merge-rows %d must be a multiple of -merge-files %d and of -merge-changes %d, with changes at most 10%% of rows",
			c.mergeRows, c.mergeFiles, c.mergeChanges)
	}
	return nil
}

// runWorker runs one case in this process and prints its measurement as JSON.
func runWorker(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("-worker: no case given")
	}
	w, ok := workers[args[0]]
	if !ok {
		return fmt.Errorf("-worker: unknown case %q", args[0])
	}
	// BENCHRUN_CPUPROFILE=dir writes dir/<case>.pprof, to see where a case spends its time.
	if dir := os.Getenv("BENCHRUN_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, args[0]+".pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// BENCHRUN_TRACE=dir writes dir/<case>.trace (runtime/trace), to see what runs
	// when, on which core.
	if dir := os.Getenv("BENCHRUN_TRACE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, args[0]+".trace"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	// BENCHRUN_HEAPPROFILE=dir writes dir/<case>.heap.pprof: the heap profile (live
	// objects as of the last GC) taken when the heap in use was largest, sampled every
	// 50 ms, to see what holds the peak. The sampling stops the world: no timing with it.
	if dir := os.Getenv("BENCHRUN_HEAPPROFILE"); dir != "" {
		stop := sampleHeap(filepath.Join(dir, args[0]+".heap.pprof"))
		defer stop()
	}
	// BENCHRUN_CPULOG=dir writes dir/<case>.cpu.tsv: the cores the process used in each
	// 100 ms, to see when a case leaves a core idle.
	if dir := os.Getenv("BENCHRUN_CPULOG"); dir != "" {
		stop, err := logCPU(filepath.Join(dir, args[0]+".cpu.tsv"))
		if err != nil {
			return err
		}
		defer stop()
	}
	// BENCHRUN_ALLOCPROFILE=dir writes dir/<case>.alloc.pprof: what the case allocated,
	// by call site (every 64 KiB sampled; alloc_space), to see what makes the garbage.
	if dir := os.Getenv("BENCHRUN_ALLOCPROFILE"); dir != "" {
		runtime.MemProfileRate = 64 << 10
		defer writeAllocProfile(filepath.Join(dir, args[0]+".alloc.pprof"))
	}
	m, err := w(ctx, args[1:])
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return json.NewEncoder(stdout).Encode(m)
}

// writeAllocProfile writes the allocation profile so far to path.
func writeAllocProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "alloc profile:", err)
		return
	}
	defer f.Close()
	runtime.GC() // the profile shows allocations up to the last GC
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "alloc profile:", err)
	}
}

// logCPU writes, every 100 ms until stop, the time since it began and the cores the
// process used since the last line (user and system CPU time over wall time).
func logCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	cpu := processCPU
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		start, last, lastCPU := time.Now(), time.Now(), cpu()
		fmt.Fprintln(f, "ms\tcores")
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				c := cpu()
				fmt.Fprintf(f, "%d\t%.2f\n", now.Sub(start).Milliseconds(), float64(c-lastCPU)/float64(now.Sub(last)))
				last, lastCPU = now, c
			}
		}
	}()
	return func() { close(done); <-finished; f.Close() }, nil
}

// sampleHeap keeps the heap profile of the moment the heap in use was largest, checking
// every 50 ms; the returned func stops sampling and writes the profile to path.
func sampleHeap(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	var best bytes.Buffer
	go func() {
		defer close(finished)
		var peak uint64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
				best.Reset()
				pprof.Lookup("heap").WriteTo(&best, 0)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		os.WriteFile(path, best.Bytes(), 0o666)
	}
}
