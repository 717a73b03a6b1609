package jobs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// metric reads an operationMetrics value (a number, or a string of one).
func metric(t *testing.T, m map[string]any, name string) int64 {
	t.Helper()
	switch v := m[name].(type) {
	case nil:
		return 0
	case float64:
		return int64(v)
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("operationMetrics %s = %q", name, v)
		}
		return n
	}
	t.Fatalf("operationMetrics %s = %#v", name, m[name])
	return 0
}

// checkFacts checks what a run recorded against what its commits say: the versions it
// wrote are the target's versions after before, and its rows, files and bytes written
// are their operationMetrics' (a MERGE's rows inserted, updated and deleted; a WRITE's
// output rows); rowsIn is the rows it read of its input.
func checkFacts(t *testing.T, env *Env, decl *Table, before int64, res Result, rowsIn int64) {
	t.Helper()
	tbl, err := env.openTable(t.Context(), decl)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := tbl.History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	var rows, files, bytes int64
	for _, h := range hist {
		if h.Version <= before || h.Operation == "CREATE TABLE" {
			continue // (a table the stage created: no data)
		}
		versions = append(versions, h.Version)
		m := h.OperationMetrics
		switch h.Operation {
		case "MERGE":
			rows += metric(t, m, "numTargetRowsInserted") + metric(t, m, "numTargetRowsUpdated") + metric(t, m, "numTargetRowsDeleted")
			files += metric(t, m, "numTargetFilesAdded")
			bytes += metric(t, m, "numTargetBytesAdded")
		case "WRITE":
			rows += metric(t, m, "numOutputRows")
			files += metric(t, m, "numFiles")
			bytes += metric(t, m, "numOutputBytes")
		default:
			t.Fatalf("version %d: operation %s", h.Version, h.Operation)
		}
	}
	slices.Sort(versions)
	var recorded []int64
	for _, v := range res.VersionsWritten {
		if v.Table != decl.Name {
			t.Errorf("recorded a version %d of %s, not the target %s", v.Version, v.Table, decl.Name)
		}
		recorded = append(recorded, v.Version)
	}
	got := fmt.Sprintf("rows in %d, rows out %d, files %d, bytes %d, versions %v", res.RowsRead, res.RowsWritten, res.FilesWritten, res.BytesWritten, recorded)
	want := fmt.Sprintf("rows in %d, rows out %d, files %d, bytes %d, versions %v", rowsIn, rows, files, bytes, versions)
	if got != want {
		t.Errorf("the run recorded\n  %s\nits commits and input say\n  %s\n(notes: %q)", got, want, res.Notes)
	}
}

// What every stage kind records of a run (rows in and out, files, bytes, versions) is
// what its commits say and what it read, in memory and over a tiny budget (every keyed
// stage then works over spill files, reading its input once).
func TestRunFactsMatchHistory(t *testing.T) {
	for _, budget := range []ByteSize{0, tinyBudget} {
		over := func(t *testing.T, res Result) {
			t.Helper()
			if spilled(res) != (budget > 0) {
				t.Errorf("over spill files: %v, with a budget of %d (notes %q)", spilled(res), budget, res.Notes)
			}
		}
		t.Run(fmt.Sprintf("budget=%d/ingest", budget), func(t *testing.T) {
			for _, mode := range []string{"append", "upsert", "upsert_sequence", "snapshot"} {
				t.Run(mode, func(t *testing.T) {
					tbl := eventsTable(t)
					clock := &testClock{t: t0}
					env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), tbl)
					env.Delta.Now = clock.Now
					env.MemoryBudget, env.SpillDir = budget, t.TempDir()
					cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: strings.TrimSuffix(mode, "_sequence"), Keys: []string{"id"}, DeleteWhen: "op = 'D'"}
					if mode == "append" {
						cfg.Keys, cfg.DeleteWhen = nil, ""
					}
					if mode == "upsert_sequence" {
						cfg.SequenceBy = "updated_at"
					}
					stage := NewIngest("ingest", cfg)
					file := 0
					for run, n := range []int{120, 200} {
						var lines []string
						for k := range n {
							op := "U"
							if k%37 == 5 {
								op = "D"
							}
							lines = append(lines, fmt.Sprintf("C%04d,city %d,%s,2026-01-14T%02d:00:00Z", k, (k*(run+1))%7, op, run))
						}
						for part := range 2 { // two files a run
							file++
							half := lines[part*len(lines)/2 : (part+1)*len(lines)/2]
							putFile(t, landing, fmt.Sprintf("c/%03d.csv", file), "id,city,op,updated_at\n"+strings.Join(half, "\n")+"\n")
						}
						clock.Advance(time.Hour)
						before := versionOf(t, env, tbl)
						res := runStage(t, stage, env)
						if mode != "append" && !(mode == "snapshot" && run == 0) {
							over(t, res)
						}
						checkFacts(t, env, tbl, before, res, int64(n))
					}
				})
			}
		})
		for _, kind := range []string{"scd1", "scd2", "scd2_snapshot", "capture_history"} {
			t.Run(fmt.Sprintf("budget=%d/%s", budget, kind), func(t *testing.T) {
				staging, dim := customerTables(t)
				if kind == "scd2_snapshot" {
					staging.Properties = nil
				}
				target := dim
				var stage Stage
				switch kind {
				case "scd1":
					target = &Table{Name: "current.customer", Path: "current/customer",
						Schema: schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp"), Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
					stage = NewSCD1Merge("merge", &SCD1Config{Source: staging.Name, SourceChanges: true, Target: target.Name, Keys: []string{"customer_id"}, SequenceBy: "updated_at", Deletes: "delete"})
				case "scd2":
					stage = NewSCD2Merge("merge", scd2Config())
				case "scd2_snapshot":
					cfg := scd2Config()
					cfg.SourceChanges, cfg.SequenceBy = false, ""
					stage = NewSCD2Merge("merge", cfg)
				case "capture_history":
					target = &Table{Name: "history.customers", Path: "history/customers", Schema: schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp")}
					stage = NewCaptureHistory("capture", &CaptureHistoryConfig{Source: staging.Name, Target: target.Name})
				}
				clock := &testClock{t: d1}
				env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, target)
				env.MemoryBudget, env.SpillDir = budget, t.TempDir()
				for day, n := range []int{60, 100} {
					var rows [][]any
					for k := range n {
						rows = append(rows, []any{fmt.Sprintf("C%04d", k), "Ada", fmt.Sprintf("city %d", (k*(day+1))%5), clock.t})
					}
					read := int64(n)
					if kind == "scd2_snapshot" {
						writeRows(t, env, staging, true, rows...)
					} else {
						appendRows(t, env, staging, rows...)
					}
					clock.Advance(time.Hour)
					before := versionOf(t, env, target)
					res := runStage(t, stage, env)
					if kind != "capture_history" {
						over(t, res)
					}
					checkFacts(t, env, target, before, res, read)
					clock.t = clock.t.Add(24 * time.Hour)
				}
			})
		}
	}
}

// versionOf is a declared table's version (-1: not created yet).
func versionOf(t *testing.T, env *Env, decl *Table) int64 {
	t.Helper()
	exists, err := delta.Exists(t.Context(), env.Warehouse, decl.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !exists {
		return -1
	}
	return tableVersion(t, env, decl)
}
