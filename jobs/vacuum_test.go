package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func TestVacuumKeepsWhatHistoryStillNeeds(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: t0}
	src, dst := historyTables(t)
	store := mem.New(mem.Config{Now: clock.Now})
	env := newTestEnv(store, clock, src, dst)
	appendRows(t, env, src, []any{"T1", 10})      // v1
	writeRows(t, env, src, true, []any{"T2", 20}) // v2 removes v1's file
	clock.Advance(8 * 24 * time.Hour)             // past the default 7-day retention

	capture := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name})
	consumers := []Consumer{{Pipeline: "sales", Stage: "capture", Source: src, History: dst, AppID: capture.AppID()}}
	vac := NewVacuum("vacuum", &VacuumConfig{TableNames: []string{src.Name}}, consumers)

	// The history stage has not captured v1..v2 yet: vacuum keeps v1's file.
	res := runStage(t, vac, env)
	if res.FilesDeleted != 0 || !strings.Contains(strings.Join(res.Notes, "\n"), `kept 1 file that stage "capture" of pipeline "sales" still needs from version 0`) {
		t.Fatalf("vacuum before capture: deleted %d, notes %q", res.FilesDeleted, res.Notes)
	}
	// Capture, then vacuum removes it; the history is complete.
	runStage(t, capture, env)
	res = runStage(t, vac, env)
	if res.FilesDeleted != 1 || res.BytesDeleted == 0 {
		t.Fatalf("vacuum after capture: %+v, want 1 file deleted", res)
	}
	want := []string{"T1|10|delete|2", "T1|10|insert|1", "T2|20|insert|2"}
	if got := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version"); !slices.Equal(got, want) {
		t.Fatalf("history:\n%s", diff(got, want))
	}
	// The current rows are intact; time travel to v1 now fails clearly.
	if got := tableRows(t, env, src, "id"); !slices.Equal(got, []string{"T2"}) {
		t.Fatalf("source rows %v", got)
	}
	tbl, _ := env.openTable(ctx, src)
	old, err := tbl.SnapshotAt(ctx, 1)
	if err == nil {
		sc, err2 := old.Scan(ctx, delta.ScanOptions{})
		if err2 == nil {
			for sc.Next() {
			}
			err = sc.Err()
			sc.Release()
		} else {
			err = err2
		}
	}
	if err == nil {
		t.Fatal("reading version 1 after vacuum succeeded; its file should be gone")
	}
}

func TestVacuumRetentionAndDryRun(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: t0}
	src, _ := historyTables(t)
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src)
	appendRows(t, env, src, []any{"T1", 10})
	writeRows(t, env, src, true, []any{"T2", 20})
	clock.Advance(2 * 24 * time.Hour)

	day := Duration(24 * time.Hour)
	_, err := NewVacuum("v", &VacuumConfig{TableNames: []string{src.Name}, Retain: &day}, nil).Run(ctx, env)
	if !errors.Is(err, delta.ErrRetentionTooShort) {
		t.Fatalf("retain 24h without force: err = %v, want ErrRetentionTooShort", err)
	}
	dry := runStage(t, NewVacuum("v", &VacuumConfig{TableNames: []string{src.Name}, Retain: &day, Force: true, DryRun: true}, nil), env)
	notes := strings.Join(dry.Notes, "\n")
	if dry.FilesDeleted != 0 || !strings.Contains(notes, "would delete 1 file") || !strings.Contains(notes, ".parquet") {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := tableRows(t, env, src, "id"); !slices.Equal(got, []string{"T2"}) {
		t.Fatalf("rows after dry run %v", got)
	}
	res := runStage(t, NewVacuum("v", &VacuumConfig{TableNames: []string{src.Name}, Retain: &day, Force: true}, nil), env)
	if res.FilesDeleted != 1 {
		t.Fatalf("forced vacuum deleted %d files, want 1", res.FilesDeleted)
	}
	tbl, _ := env.openTable(ctx, src)
	h, err := tbl.History(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Operation != "VACUUM END" || h[1].Operation != "VACUUM START" {
		t.Errorf("history ops = %s, %s; want VACUUM END, VACUUM START", h[0].Operation, h[1].Operation)
	}
}

// A crash at any store operation of a vacuum, then reruns, leaves the table's rows and
// exactly the data files an uninterrupted vacuum leaves.
func TestVacuumCrashAtEveryOperation(t *testing.T) {
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: t0}
		src, dst := historyTables(t)
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, src, dst)
		appendRows(t, env, src, []any{"T1", 10})
		writeRows(t, env, src, true, []any{"T2", 20}) // removes v1's file
		writeRows(t, env, src, true, []any{"T3", 30}) // removes v2's file
		clock.Advance(8 * 24 * time.Hour)             // past the default 7-day retention
		return fs, env, src
	}
	src, _ := historyTables(t)
	stage := NewVacuum("vacuum", &VacuumConfig{TableNames: []string{src.Name}}, nil)
	want := crashAtEveryOperation(t, stage, setup, func(env *Env, table *Table) []string {
		rows := tableRows(t, env, table, "id")
		infos, err := env.Warehouse.List(context.Background(), table.Path+"/", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if strings.HasSuffix(in.Key, ".parquet") {
				rows = append(rows, "file "+strings.TrimPrefix(in.Key, table.Path+"/")[:len("part-00000")]) // the rest is a random uuid
			}
		}
		return rows
	})
	if !slices.Equal(want, []string{"T3", "file part-00000"}) {
		t.Fatalf("clean run: %v, want the live row and its one file", want)
	}
}
