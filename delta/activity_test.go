package delta_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// LastDataChange finds the newest commit that changed data, skipping commits that only
// change properties, and reads its in-commit timestamp where the table writes them,
// not the commit file's mtime; CommitOutput sums what a commit added.
func TestLastDataChangeAndCommitOutput(t *testing.T) {
	ctx := context.Background()
	for _, ict := range []bool{false, true} {
		name := "mtime"
		if ict {
			name = "in-commit timestamps"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := fs.New(fs.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := delta.LastDataChange(ctx, st, "t"); !errors.Is(err, objectstore.ErrNotExist) {
				t.Fatalf("no table: %v, want ErrNotExist", err)
			}
			clock := &manualClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			props := map[string]string{}
			if ict {
				props["delta.enableInCommitTimestamps"] = "true"
			}
			tbl, err := delta.Create(ctx, st, "t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}, Properties: props}, delta.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			dc, err := delta.LastDataChange(ctx, st, "t")
			if err != nil || dc.Found || dc.Version != 0 || dc.Latest != 0 {
				t.Fatalf("created only: %+v, %v; want not found at v0", dc, err)
			}
			clock.Advance(time.Hour)
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}, {2, "b", "y"}}, nil, nil)
			clock.Advance(time.Hour)
			if _, err := tbl.SetProperties(ctx, map[string]string{"delta.logRetentionDuration": "interval 60 days"}, nil); err != nil {
				t.Fatal(err)
			}
			// Every commit file gets one later mtime, as after a copy: with in-commit
			// timestamps the answer does not move.
			if ict {
				same := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
				logs, _ := filepath.Glob(filepath.Join(dir, "t", "_delta_log", "*.json"))
				for _, f := range logs {
					if err := os.Chtimes(f, same, same); err != nil {
						t.Fatal(err)
					}
				}
			}
			dc, err = delta.LastDataChange(ctx, st, "t")
			if err != nil {
				t.Fatal(err)
			}
			if !dc.Found || dc.Version != 1 || dc.Latest != 2 {
				t.Errorf("got %+v; want the data change at v1 of latest v2", dc)
			}
			if ict {
				if want := ictOf(t, st, "t", 1); !dc.Timestamp.Equal(want) {
					t.Errorf("timestamp %v, want v1's in-commit timestamp %v", dc.Timestamp, want)
				}
			} else {
				// v1's file time, made monotonic: a commit in the same millisecond as v0 reads
				// one millisecond after it.
				mtime := func(v string) time.Time {
					fi, err := os.Stat(filepath.Join(dir, "t", "_delta_log", v+".json"))
					if err != nil {
						t.Fatal(err)
					}
					return fi.ModTime().Truncate(time.Millisecond)
				}
				want := mtime("00000000000000000001")
				if v0 := mtime("00000000000000000000"); !want.After(v0) {
					want = v0.Add(time.Millisecond)
				}
				if !dc.Timestamp.Equal(want) {
					t.Errorf("timestamp %v, want v1's file time made monotonic, %v", dc.Timestamp, want)
				}
			}
			out, err := delta.CommitOutput(ctx, st, "t", 1)
			if err != nil || out.Files < 1 || out.Bytes <= 0 || !out.RowsKnown || out.Rows != 2 {
				t.Errorf("v1 output %+v, %v; want 2 rows in its files", out, err)
			}
			if out, err := delta.CommitOutput(ctx, st, "t", 2); err != nil || out.Files != 0 || out.Rows != 0 {
				t.Errorf("v2 (properties) output %+v, %v; want nothing", out, err)
			}
			s, err := delta.SchemaAt(ctx, st, "t", 1)
			if err != nil || len(s.Fields) != len(testSchema().Fields) {
				t.Errorf("schema at v1: %v, %v", s, err)
			}
		})
	}
}
