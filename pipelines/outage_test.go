package pipelines_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// The sales example (ingest, capture_history, scd2_merge, vacuum) runs on a MinIO of
// the test's own, which is killed in the middle of a stage and started again 5 s later.
// The stage retries, or fails cleanly; then a rerun leaves exactly the rows of an
// uninterrupted run in every table.
func TestMinIOOutageDuringStages(t *testing.T) {
	m := testenv.StartMinIO(t)
	dir := copyExample(t, "../examples/pipelines/sales")
	spec := func(retries int) *pipelines.Spec {
		data, err := os.ReadFile(filepath.Join(dir, "pipeline.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// Every stage: the given retries, 3 s apart at first (the outage lasts 5 s).
		yaml := regexp.MustCompile(`(?m)^    (retries|timeout): .*\n`).ReplaceAllString(string(data), "")
		yaml = strings.ReplaceAll(yaml, "    kind: ", fmt.Sprintf("    retries: %d\n    retry_delay: 3s\n    max_retry_delay: 5s\n    kind: ", retries))
		sp, err := pipelines.Parse(filepath.Join(dir, "pipeline.yaml"), []byte(yaml), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	store := func(t *testing.T) objectstore.Store {
		cfg := m.Config("orchestrator-test")
		cfg.Prefix = testenv.S3Prefix(t)
		cfg.MaxRetries = 3 // fail an attempt within about a second of the outage
		cfg.StallTimeout = 5 * time.Second
		return testenv.S3StoreOf(t, cfg)
	}
	ctx := context.Background()
	ref := store(t)
	if r := runPipeline(t, ctx, spec(0), ref); r.Status != dag.Succeeded {
		t.Fatalf("the uninterrupted run ended %v:\n%s", r.Status, nodeErrors(r))
	}
	reference := tableRows(t, ctx, spec(0), ref)

	cases := []struct {
		name    string
		op      faultstore.Op
		under   string // the first such operation on a key with this prefix stops MinIO
		retries int
	}{
		{"ingest writing a data file", faultstore.OpPut, "bronze/sales_transactions/part-", 5},
		{"capture writing a data file", faultstore.OpPut, "audit/sales_transactions_history/part-", 5},
		{"scd2 merge writing a data file", faultstore.OpPut, "sales/customer/part-", 5},
		{"scd2 merge committing, no retries", faultstore.OpPutIfAbsent, "sales/customer/_delta_log/00000000000000000001.json", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := faultstore.New(store(t))
			restarted := make(chan error, 1)
			var once sync.Once
			stopped := false
			st.OnOp(func(op faultstore.Op, key string) {
				if op != c.op || !strings.HasPrefix(key, c.under) {
					return
				}
				once.Do(func() {
					stopped = true
					m.Stop()
					go func() {
						time.Sleep(5 * time.Second)
						restarted <- m.TryStart()
					}()
				})
			})
			sp := spec(c.retries)
			first := runPipeline(t, ctx, sp, st)
			st.OnOp(nil)
			if !stopped {
				t.Fatalf("the run ended %v without reaching the fault point (%s under %s)", first.Status, c.op, c.under)
			}
			if err := <-restarted; err != nil {
				t.Fatal(err)
			}
			switch {
			case c.retries > 0 && first.Status != dag.Succeeded:
				t.Fatalf("with retries the run ended %v, want it to succeed once MinIO is back:\n%s", first.Status, nodeErrors(first))
			case c.retries == 0 && first.Status != dag.Failed:
				t.Fatalf("without retries the run ended %v, want it to fail", first.Status)
			case c.retries > 0:
				if n, _ := first.Node(stageOf(c.under)); n.Attempts < 2 {
					t.Errorf("stage %s ran %d attempts, want a retry after the outage", n.Name, n.Attempts)
				}
			}
			if second := runPipeline(t, ctx, sp, st); second.Status != dag.Succeeded {
				t.Fatalf("the rerun ended %v:\n%s", second.Status, nodeErrors(second))
			}
			got := tableRows(t, ctx, sp, st)
			for _, tbl := range sp.Tables {
				if !slices.Equal(got[tbl.Name], reference[tbl.Name]) {
					t.Errorf("table %s after the outage and a rerun:\n got %q\nwant %q (the uninterrupted run)", tbl.Name, got[tbl.Name], reference[tbl.Name])
				}
			}
		})
	}
}

func stageOf(keyPrefix string) string {
	switch {
	case strings.HasPrefix(keyPrefix, "bronze/"):
		return "ingest_sales"
	case strings.HasPrefix(keyPrefix, "audit/"):
		return "capture_sales_history"
	}
	return "merge_customers"
}

func nodeErrors(r dag.RunResult) string {
	var b strings.Builder
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "  %s: %v after %d attempts: %v\n", n.Name, n.State, n.Attempts, n.Err)
	}
	return b.String()
}

// runPipeline runs the pipeline once on the warehouse, its clock fixed so that load
// timestamps and commit times do not differ between runs.
func runPipeline(t *testing.T, ctx context.Context, sp *pipelines.Spec, warehouse objectstore.Store) dag.RunResult {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 1, 16, 2, 0, 0, 0, time.UTC) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := pipelines.LocalGraph(sp, pipelines.LocalRuntime{
		Warehouse: warehouse,
		OpenLocation: func(ctx context.Context, location string) (objectstore.Store, string, error) {
			st, err := fs.New(fs.Config{Dir: location})
			return st, "", err
		},
		Delta:  delta.Options{Now: now, UserName: "tester", Logger: quiet},
		RunID:  "run",
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, _ := dag.Run(ctx, g, dag.Options{MaxParallel: sp.MaxParallel, Now: now})
	if ctx.Err() != nil {
		t.Fatalf("the run is stuck: not done after 3 minutes:\n%s", nodeErrors(res))
	}
	return res
}

// tableRows reads every declared table's latest rows, sorted, each as its values. The
// change feed's _commit_timestamp is the commit file's time on the server, which no
// clock of ours sets; it is left out.
func tableRows(t *testing.T, ctx context.Context, sp *pipelines.Spec, st objectstore.Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, decl := range sp.Tables {
		tbl, err := delta.Open(ctx, st, decl.Path, delta.Options{})
		if err != nil {
			t.Fatalf("table %s: %v", decl.Name, err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, f := range snap.Schema().Fields {
			if f.Name != "_commit_timestamp" {
				cols = append(cols, f.Name)
			}
		}
		sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols})
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for sc.Next() {
			rec := sc.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				vals := make([]string, len(cols))
				for j, c := range rec.Columns() {
					vals[j] = c.ValueStr(i)
				}
				rows = append(rows, strings.Join(vals, "|"))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Release()
		slices.Sort(rows)
		if len(rows) == 0 {
			t.Fatalf("table %s is empty", decl.Name)
		}
		out[decl.Name] = rows
	}
	return out
}

// copyExample copies an example pipeline's directory (its file and landing data).
func copyExample(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "warehouse" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
