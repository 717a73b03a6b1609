package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two runs started in the same minute keep both results: the second's files get -2.
func TestFreeBaseKeepsEarlierResults(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "2026-12-03T1000Z-full")
	if got := freeBase(base); got != base {
		t.Fatalf("freeBase = %s, want %s", got, base)
	}
	if err := os.WriteFile(base+".md", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := freeBase(base); got != base+"-2" {
		t.Fatalf("with %s.md written: freeBase = %s, want %s-2", base, got, base)
	}
	if err := os.WriteFile(base+"-2.json", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := freeBase(base); got != base+"-3" {
		t.Fatalf("with -2.json written too: freeBase = %s, want %s-3", got, base)
	}
}

// TestSmallRunSaysTargetsAreForFull checks that a -size small report says its targets
// are stated for -size full, and a full one does not.
func TestSmallRunSaysTargetsAreForFull(t *testing.T) {
	for _, size := range []string{"small", "full"} {
		d := &driver{cfg: &config{size: size}, res: &results{Size: size, Targets: []target{{Target: "SCD2 not slower than DuckDB", Met: "NO"}}}}
		md := d.markdown()
		if got, want := strings.Contains(md, "stated for -size full"), size == "small"; got != want {
			t.Errorf("-size %s: report says the targets are for -size full: %v, want %v\n%s", size, got, want, md)
		}
	}
}
