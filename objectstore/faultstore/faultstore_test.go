package faultstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/objectstore/storetest"
)

func put(ctx context.Context, s objectstore.Store, key, val string) error {
	return s.Put(ctx, key, strings.NewReader(val), int64(len(val)))
}

// A wrapper that injects nothing is a conforming store.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objectstore.Store { return New(mem.New(mem.Config{})) })
}

func TestFailNth(t *testing.T) {
	ctx := context.Background()
	s := New(mem.New(mem.Config{}))
	s.FailNth(2, false, false)
	if err := put(ctx, s, "a", "1"); err != nil {
		t.Fatalf("op 1: %v", err)
	}
	err := put(ctx, s, "b", "2")
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("op 2 err = %v, want ErrInjected", err)
	}
	if _, err := s.Stat(ctx, "b"); !errors.Is(err, objectstore.ErrNotExist) {
		t.Errorf("failed Put left an object: Stat err = %v", err)
	}
	if !s.Injected() {
		t.Error("Injected() = false after a failure")
	}
	if err := put(ctx, s, "c", "3"); err != nil {
		t.Errorf("op 4 (not sticky) failed: %v", err)
	}
}

func TestFailNthStickyWritesOnly(t *testing.T) {
	ctx := context.Background()
	s := New(mem.New(mem.Config{}))
	s.FailNth(1, true, true)
	if _, err := s.List(ctx, "", ""); err != nil {
		t.Fatalf("reads are not counted with writesOnly: %v", err)
	}
	for _, key := range []string{"a", "b"} {
		if err := put(ctx, s, key, "x"); !errors.Is(err, ErrInjected) {
			t.Errorf("put %s err = %v, want ErrInjected (sticky)", key, err)
		}
	}
	if got := s.Count(); got != 2 {
		t.Errorf("Count = %d, want 2 writes", got)
	}
	s.Heal()
	if err := put(ctx, s, "a", "x"); err != nil {
		t.Errorf("after Heal: %v", err)
	}
}

func TestFailWritesUnder(t *testing.T) {
	ctx := context.Background()
	s := New(mem.New(mem.Config{}))
	s.FailWritesUnder("t/_delta_log/")
	if err := put(ctx, s, "t/part-0.parquet", "data"); err != nil {
		t.Fatalf("write outside the prefix failed: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "t/_delta_log/00000000000000000000.json", bytes.NewReader(nil), 0); !errors.Is(err, ErrInjected) {
		t.Errorf("commit err = %v, want ErrInjected", err)
	}
	rc, err := s.GetRange(ctx, "t/part-0.parquet", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "at" {
		t.Errorf("GetRange = %q, want %q", b, "at")
	}
}
