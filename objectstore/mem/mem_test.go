package mem_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/objectstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objectstore.Store { return mem.New(mem.Config{}) })
}

func TestModTimeFromClock(t *testing.T) {
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	s := mem.New(mem.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	if err := s.Put(ctx, "a", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if err := s.PutIfAbsent(ctx, "b", bytes.NewReader([]byte("y")), 1); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{now.Add(-time.Hour), now}
	if len(infos) != len(want) {
		t.Fatalf("List = %+v, want 2 objects", infos)
	}
	for i, in := range infos {
		if !in.ModTime.Equal(want[i]) {
			t.Errorf("%s: ModTime %v, want %v (the injected clock)", in.Key, in.ModTime, want[i])
		}
	}
}
