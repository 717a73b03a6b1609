package jobs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkIngestExpectations measures what three row expectations cost an append
// ingest of a CSV file (10 M rows; ORCH_BENCH_EXPECT_ROWS sets another size): each
// iteration loads the same file into a fresh table twice, without expectations and with
// three (an int comparison that drops, a decimal range and an IS NOT NULL that warn; one
// row in a thousand violates each), alternating which goes first, and reports both
// times and the overhead (target: at most 10%).
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
	three := []Expectation{
		{Name: "positive_quantity", Expect: "quantity > 0", OnViolation: ActionDrop},
		{Name: "sane_amount", Expect: "amount >= 0 AND amount < 100000", OnViolation: ActionWarn},
		{Name: "has_email", Expect: "email IS NOT NULL", OnViolation: ActionWarn},
	}
	load := func(i int, exps []Expectation) time.Duration {
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
		start := time.Now()
		res, err := NewIngest("load", &IngestConfig{Source: "*.csv", Target: orders.Name}).Run(context.Background(), env)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		want := int64(rows)
		if len(exps) > 0 {
			want -= int64(rows / 1000) // the dropped rows
		}
		if res.RowsWritten != want {
			b.Fatalf("wrote %d rows, want %d", res.RowsWritten, want)
		}
		return took
	}
	var plain, checked time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			plain += load(i, nil)
			checked += load(i, three)
		} else {
			checked += load(i, three)
			plain += load(i, nil)
		}
	}
	b.StopTimer()
	p, c := plain.Seconds()/float64(b.N), checked.Seconds()/float64(b.N)
	b.ReportMetric(p, "s/ingest")
	b.ReportMetric(c, "s/ingest+3expect")
	b.ReportMetric(100*(c-p)/p, "%overhead")
	b.ReportMetric(float64(rows)/c/1e6, "Mrows/s+3expect")
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
