package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGarbageRunRecord: a run record or index entry that is not JSON (a torn write by
// another tool, a disk error) is named by every command that meets it, with the file and
// what is wrong; other runs stay readable and a new run of the pipeline still works.
func TestGarbageRunRecord(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"daily.yaml": dailyPipeline, "landing/eu/2026-02-01/a.csv": "id\neu1\n"})
	p := filepath.Join(dir, "daily.yaml")
	first := runCLI(t, "run", p)
	second := runCLI(t, "run", p)
	if first.code != 0 || second.code != 0 {
		t.Fatalf("runs: exit %d, %d\n%s%s", first.code, second.code, first.stderr, second.stderr)
	}
	bad, good := runID(t, first), runID(t, second)
	records, err := filepath.Glob(filepath.Join(dir, "warehouse", "_orchestrator", "runs", "daily", "*.json"))
	if err != nil || len(records) != 2 {
		t.Fatalf("run records %v (%v), want two", records, err)
	}
	rel := "_orchestrator/runs/daily/" + bad + ".json"
	if err := os.WriteFile(filepath.Join(dir, "warehouse", filepath.FromSlash(rel)), []byte(`{"id": "daily@`), 0o644); err != nil {
		t.Fatal(err)
	}

	show := runCLI(t, "runs", "show", bad, "--pipeline", p)
	if show.code != 1 || !strings.Contains(show.stderr, rel) || !strings.Contains(show.stderr, "unexpected end of JSON input") {
		t.Errorf("runs show of a garbage record: exit %d, want 1 and an error naming %s and what is wrong\n%s%s", show.code, rel, show.stdout, show.stderr)
	}
	if r := showJSON(t, good, "--pipeline", p); r.ID != good || r.Status != "succeeded" {
		t.Errorf("the other run: %s %s", r.ID, r.Status)
	}
	if list := runCLI(t, "runs", "list", "--pipeline", p); list.code != 0 || !strings.Contains(list.stdout, good) || !strings.Contains(list.stdout, bad) {
		t.Errorf("runs list (from the index, which is intact): exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}

	entries, err := filepath.Glob(filepath.Join(dir, "warehouse", "_orchestrator", "index", "daily", "*", "*.json"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("index entries %v (%v), want two", entries, err)
	}
	if err := os.WriteFile(entries[0], []byte("\x00\x01garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	entry, _ := filepath.Rel(filepath.Join(dir, "warehouse"), entries[0])
	list := runCLI(t, "runs", "list", "--pipeline", p)
	if list.code != 1 || !strings.Contains(list.stderr, filepath.ToSlash(entry)) || !strings.Contains(list.stderr, "invalid character") {
		t.Errorf("runs list over a garbage index entry: exit %d, want 1 and an error naming %s\n%s%s", list.code, entry, list.stdout, list.stderr)
	}

	third := runCLI(t, "run", p)
	if third.code != 0 {
		t.Errorf("a run beside garbage records: exit %d\n%s", third.code, third.stderr)
	}
}
