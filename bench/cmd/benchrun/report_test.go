package main

import (
	"os"
	"path/filepath"
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
