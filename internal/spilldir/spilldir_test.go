package spilldir

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Sweep removes the spill directories whose owner is gone (a dead pid, or a live pid
// that started at another time: reused), and those without an owner older than a day;
// it keeps this process's, a live process's, another host's and a young one without an
// owner, and anything that is no spill directory.
func TestSweep(t *testing.T) {
	base := t.TempDir()
	// A dead pid: this test binary run again, running no test, and gone.
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatalf("run the test binary for a dead pid: %v", err)
	}
	me := Self()
	write := func(name string, o *Owner, age time.Duration) string {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0.arrow"), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		if o != nil {
			b, _ := json.Marshal(o)
			if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		os.Chtimes(dir, old, old)
		return dir
	}
	mine, err := Create(base)
	if err != nil {
		t.Fatal(err)
	}
	gone := write(Prefix+"dead", &Owner{Host: me.Host, PID: dead.Process.Pid, Start: "1"}, 0)
	reused := Owner{Host: me.Host, PID: os.Getppid(), Start: "not-its-start"}
	if startTime(os.Getppid()) == "" {
		reused.PID = dead.Process.Pid // no start times here: a dead pid instead
	}
	reusedDir := write(Prefix+"reused", &reused, 0)
	parent := write(Prefix+"live", &Owner{Host: me.Host, PID: os.Getppid(), Start: startTime(os.Getppid())}, 0)
	other := write(Prefix+"otherhost", &Owner{Host: me.Host + "-elsewhere", PID: dead.Process.Pid}, 0)
	young := write(Prefix+"legacy-young", nil, time.Hour)
	old := write(Prefix+"legacy-old", nil, 48*time.Hour)
	notSpill := write("something-else", nil, 48*time.Hour)

	removed, err := Sweep(base)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, r := range removed {
		dirs = append(dirs, r.Dir)
		if r.Bytes < 1000 {
			t.Errorf("%s: %d bytes removed, want its files counted", r.Dir, r.Bytes)
		}
	}
	slices.Sort(dirs)
	want := []string{gone, old, reusedDir}
	slices.Sort(want)
	if !slices.Equal(dirs, want) {
		t.Errorf("removed %v, want %v", dirs, want)
	}
	for _, keep := range []string{mine, parent, other, young, notSpill} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: %v, want it kept", keep, err)
		}
	}
	for _, d := range want {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", d, err)
		}
	}
	if r, err := Sweep(filepath.Join(base, "missing")); err != nil || len(r) != 0 {
		t.Errorf("sweep of a missing base: %v %v", r, err)
	}
}
