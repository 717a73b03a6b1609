package jobs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkIngestExpectations measures what three row expectations cost an append
// ingest of a CSV file (10 M rows; ORCH_BENCH_EXPECT_ROWS sets another size): each
// iteration loads the same file into a fresh table three times: without expectations,
// with three that warn (an int comparison, a decimal range, an IS NOT NULL; one row in a
// thousand violates each) and with the same three where the first drops, in a rotating
// order, and reports the times (wall and CPU) and the overheads (target: at most 10%).
//
//	go test ./jobs -run '^$' -bench IngestExpectations -benchtime 3x
func BenchmarkIngestExpectations(b *testing.B) {
	rows := 10_000_000
	if s := os.Getenv("ORCH_BENCH_EXPECT_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	dir := b.TempDir()
	landing := filepath.Join(dir, "landing")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		b.Fatal(err)
	}
	writeExpectCSV(b, filepath.Join(landing, "orders.csv"), rows)
	src, err := fs.New(fs.Config{Dir: landing})
	if err != nil {
		b.Fatal(err)
	}
	warn := []Expectation{
		{Name: "positive_quantity", Expect: "quantity > 0", OnViolation: ActionWarn},
		{Name: "sane_amount", Expect: "amount >= 0 AND amount < 100000", OnViolation: ActionWarn},
		{Name: "has_email", Expect: "email IS NOT NULL", OnViolation: ActionWarn},
	}
	drop := slices.Clone(warn)
	drop[0].OnViolation = ActionDrop
	load := func(i int, exps []Expectation) (wall, cpu time.Duration) {
		wh := filepath.Join(dir, fmt.Sprintf("wh-%d-%d", i, len(exps)))
		store, err := fs.New(fs.Config{Dir: wh})
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(wh)
		orders := &Table{Name: "bronze.orders", Path: "bronze/orders",
			Schema: schemaOf(b, "id bigint", "email string", "quantity int", "amount decimal(10,2)", "sold_at timestamp", "source_file string", "load_timestamp timestamp")}
		env := newTestEnv(store, &testClock{t: t0}, orders)
		env.OpenLocation = func(ctx context.Context, loc string) (objectstore.Store, string, error) { return src, "", nil }
		env.Expectations = exps
		start, cpu0 := time.Now(), processCPU(b)
		res, err := NewIngest("load", &IngestConfig{Source: "*.csv", Target: orders.Name}).Run(context.Background(), env)
		took, cpuTook := time.Since(start), processCPU(b)-cpu0
		if err != nil {
			b.Fatal(err)
		}
		want := int64(rows)
		if len(exps) > 0 && exps[0].OnViolation == ActionDrop {
			want -= int64(rows / 1000) // the dropped rows
		}
		if res.RowsWritten != want {
			b.Fatalf("wrote %d rows, want %d", res.RowsWritten, want)
		}
		return took, cpuTook
	}
	// The host is shared: besides wall time, the CPU time this process spent (all its
	// goroutines) is what the checks add, whatever else runs on the machine. Each
	// iteration runs the three loads in a rotating order.
	var wall, cpu [3]time.Duration
	sets := [3][]Expectation{nil, warn, drop}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 3 {
			j := (i + k) % 3
			w, c := load(i, sets[j])
			wall[j] += w
			cpu[j] += c
		}
	}
	b.StopTimer()
	n := float64(b.N)
	per := func(d time.Duration) float64 { return d.Seconds() / n }
	b.ReportMetric(per(wall[0]), "s/ingest")
	b.ReportMetric(per(wall[1]), "s/ingest+3warn")
	b.ReportMetric(per(wall[2]), "s/ingest+2warn1drop")
	b.ReportMetric(per(cpu[0]), "cpu-s/ingest")
	b.ReportMetric(100*(per(cpu[1])-per(cpu[0]))/per(cpu[0]), "%cpu-overhead-3warn")
	b.ReportMetric(100*(per(cpu[2])-per(cpu[0]))/per(cpu[0]), "%cpu-overhead-2warn1drop")
	b.ReportMetric(100*(per(wall[1])-per(wall[0]))/per(wall[0]), "%overhead-3warn")
	b.ReportMetric(100*(per(wall[2])-per(wall[0]))/per(wall[0]), "%overhead-2warn1drop")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeExpectCSV writes rows orders; row i (1-based) violates positive_quantity,
// sane_amount and has_email when i%1000 is 7, 8 and 9.
func writeExpectCSV(b *testing.B, path string, rows int) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("id,email,quantity,amount,sold_at\n")
	var sb strings.Builder
	for i := 1; i <= rows; i++ {
		sb.Reset()
		qty, amount, email := i%50+1, fmt.Sprintf("%d.%02d", i%9000, i%100), fmt.Sprintf("c%d@example.com", i%100000)
		switch i % 1000 {
		case 7:
			qty = -1
		case 8:
			amount = "-5.00"
		case 9:
			email = ""
		}
		fmt.Fprintf(&sb, "%d,%s,%d,%s,2026-01-%02dT%02d:%02d:00Z\n", i, email, qty, amount, i%28+1, i%24, i%60)
		w.WriteString(sb.String())
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
