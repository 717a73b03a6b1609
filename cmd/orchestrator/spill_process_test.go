package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpillDirectoryOfAKilledProcess: a run over its memory budget is killed (SIGKILL)
// while it spills; its spill directory stays behind, marked with its owner; the next
// run removes it when it starts, says so, and leaves no directory of its own.
func TestSpillDirectoryOfAKilledProcess(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	// A file that takes the run seconds to load under a 4 MiB budget: it is killed while
	// it spills.
	var rows strings.Builder
	rows.WriteString("id,name\n")
	for i := range 2_000_000 {
		fmt.Fprintf(&rows, "k%07d,name of %d\n", i, i)
	}
	writeFiles(t, dir, map[string]string{"landing/big.csv": rows.String(), "big.yaml": `pipeline: big
warehouse: ` + filepath.Join(dir, "warehouse") + `
tables:
  raw.big:
    columns: [{name: id, type: string}, {name: name, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: raw.big, mode: upsert, keys: [id]}
`})
	args := []string{"run", filepath.Join(dir, "big.yaml"), "--memory-budget", "4MiB", "--spill-dir", spill}
	cmd := exec.Command(bin, args...)
	cmd.Env = commandEnv(nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var left string
	waitFor(t, 60*time.Second, "the run to write spill files", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(spill, "orchestrator-spill-*"))
		for _, d := range dirs {
			files, _ := os.ReadDir(d)
			if len(files) >= 2 { // the owner file and a spill file
				left = d
				return true
			}
		}
		return false
	})
	owner, err := os.ReadFile(filepath.Join(left, "owner.json"))
	if err != nil || !strings.Contains(string(owner), fmt.Sprintf(`"pid":%d`, cmd.Process.Pid)) {
		t.Errorf("owner file of %s: %s (%v), want the run's pid %d", left, owner, err, cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("the killed run's spill directory: %v, want it left behind", err)
	}

	// The next run (with room enough not to spill) removes it as it starts.
	r := runCmd(t, "", bin, "run", filepath.Join(dir, "big.yaml"), "--spill-dir", spill)
	if r.code != 0 {
		t.Fatalf("the next run: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the killed run's spill directory after the next run: %v, want it removed", err)
	}
	if !strings.Contains(r.stderr, "removed the spill directory of a process that is gone") || !strings.Contains(r.stderr, fmt.Sprint(cmd.Process.Pid)) {
		t.Errorf("the next run's stderr:\n%s\nwant it to say it removed the directory of pid %d", r.stderr, cmd.Process.Pid)
	}
	if dirs, _ := filepath.Glob(filepath.Join(spill, "orchestrator-spill-*")); len(dirs) != 0 {
		t.Errorf("spill directories after the next run: %v, want none", dirs)
	}
}
