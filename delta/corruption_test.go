package delta_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Damaged tables: a reader fails with an error that names the damaged file (or recovers
// where the protocol allows), and a writer never commits on top of a state it could not
// read. Each case checks the exact rows where a table stays readable.

const tlog = "warehouse/t/_delta_log/"

// threeVersions is a table with rows committed at versions 1, 2 and 3.
func threeVersions(t *testing.T) (*delta.Table, objectstore.Store) {
	t.Helper()
	tbl := cdfTable(t,
		[]row{{1, "a", "x"}, {2, "b", "y"}},
		[]row{{3, "c", "x"}},
		[]row{{4, "d", "y"}})
	return tbl, tbl.Store()
}

func putObject(t *testing.T, st objectstore.Store, key string, body []byte) {
	t.Helper()
	if err := st.Put(context.Background(), key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

func wantErrNaming(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one naming %q", what, parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error %q does not name %q", what, err, p)
		}
	}
}

func TestDamagedCommitFileIsRefused(t *testing.T) {
	ctx := context.Background()
	damages := []struct {
		name   string
		damage func(b []byte) []byte
		detail string
	}{
		{"empty", func([]byte) []byte { return nil }, "the file is empty (0 bytes)"},
		{"blank lines only", func([]byte) []byte { return []byte("\n\n") }, "the file is empty (2 bytes)"},
		{"truncated mid-line", func(b []byte) []byte { return b[:len(b)/2] }, "line "},
		{"garbage", func([]byte) []byte { return []byte("\x00\x01PK\x03garbage") }, "line 1: not a JSON object"},
		{"garbage after an action", func(b []byte) []byte {
			first, _, _ := bytes.Cut(b, []byte("\n"))
			return append(slices.Clone(first), "}garbage\n"...)
		}, "line 1: unexpected data after the JSON object"},
		{"a null line", func(b []byte) []byte { return append(slices.Clone(b), "null\n"...) }, "not a JSON object"},
	}
	for _, d := range damages {
		for _, v := range []int64{2, 3} { // in the middle of the log, and the latest version
			t.Run(fmt.Sprintf("%s/version %d", d.name, v), func(t *testing.T) {
				tbl, st := threeVersions(t)
				key := fmt.Sprintf("%s%020d.json", tlog, v)
				putObject(t, st, key, d.damage(readObject(t, st, key)))

				_, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
				wantErrNaming(t, "Open", err, "corrupt commit file "+key, d.detail)
				if v == 3 {
					// The versions before the damage still read, row for row.
					snap, err := tbl.SnapshotAt(ctx, 2)
					if err != nil {
						t.Fatalf("SnapshotAt(2): %v", err)
					}
					want := sortedStrings(row{1, "a", "x"}.String(), row{2, "b", "y"}.String(), row{3, "c", "x"}.String())
					if got := tableRows(t, snap); !slices.Equal(got, want) {
						t.Fatalf("rows at version 2 = %q, want %q", got, want)
					}
				}

				// A writer that read version 2 before the damage, and a fresh one, both
				// refuse to commit: version 4 must not land on a version nobody can read.
				old, err := tbl.SnapshotAt(ctx, v-1)
				if err != nil {
					t.Fatal(err)
				}
				tx := tbl.NewTransaction(old, delta.TxOptions{Operation: "WRITE"})
				tx.AddFiles(writeRows(t, tbl, []row{{5, "e", "x"}})...)
				_, err = tx.Commit(ctx)
				wantErrNaming(t, "Commit on an older snapshot", err, key)
				fresh, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
				if err == nil {
					t.Fatalf("a fresh writer opened the damaged table at version %d", mustVersion(t, fresh))
				}
				if _, err := st.Stat(ctx, fmt.Sprintf("%s%020d.json", tlog, 4)); !errors.Is(err, objectstore.ErrNotExist) {
					t.Fatalf("version 4 exists after the writers failed (Stat: %v), want none", err)
				}
			})
		}
	}
}

func mustVersion(t *testing.T, tbl *delta.Table) int64 {
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version()
}

// A checkpoint replaced by another one (here the checkpoint of an older version, under
// the newer name) disagrees with _last_checkpoint: the reader does not trust it and
// replays the log instead; with the log before it cleaned up, it fails naming it.
func TestCheckpointThatDoesNotMatchItsLog(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T) (*delta.Table, objectstore.Store, []string) {
		tbl, _, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "2"})
		var want []string
		for i := int64(1); i <= 5; i++ {
			r := row{i, fmt.Sprintf("n%d", i), "x"}
			commitChange(t, tbl, "WRITE", nil, []row{r}, nil, nil)
			want = append(want, r.String())
		}
		st := tbl.Store()
		putObject(t, st, tlog+"00000000000000000004.checkpoint.parquet", readObject(t, st, tlog+"00000000000000000002.checkpoint.parquet"))
		return tbl, st, sortedStrings(want...)
	}
	t.Run("the log is there: replay", func(t *testing.T) {
		_, st, want := build(t)
		tbl, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Version() != 5 || snap.CheckpointVersion() != 2 {
			t.Errorf("loaded version %d from checkpoint %d, want version 5 from checkpoint 2 (4 is refused)", snap.Version(), snap.CheckpointVersion())
		}
		if got := tableRows(t, snap); !slices.Equal(got, want) {
			t.Fatalf("rows = %q, want %q", got, want)
		}
	})
	t.Run("the log was cleaned up: error", func(t *testing.T) {
		_, st, _ := build(t)
		for _, name := range []string{"00000000000000000000.json", "00000000000000000001.json", "00000000000000000002.json",
			"00000000000000000002.checkpoint.parquet", "00000000000000000003.json"} {
			if err := st.Delete(ctx, tlog+name); err != nil {
				t.Fatal(err)
			}
		}
		_, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
		wantErrNaming(t, "Open", err, tlog+"00000000000000000004.checkpoint.parquet", "_last_checkpoint records")
	})
}

// A data file that is missing, shorter or longer than its add action fails the scan with
// an error naming it, on every store and read path.
func TestDamagedDataFileIsRefused(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		for _, ranged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ranged=%v", name, ranged), func(t *testing.T) {
				if ranged {
					defer delta.ForceRangedReads()()
				}
				root := "damaged/" + strings.ReplaceAll(t.Name(), "/", "_")
				tbl, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{})
				if err != nil {
					t.Fatal(err)
				}
				commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}, {2, "b", "x"}}, nil, nil)
				snap, err := tbl.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				a := snap.Files()[0]
				key := tbl.Key(a.Path)
				good := readObject(t, st, key)
				for _, c := range []struct {
					name   string
					body   []byte // nil: delete the file
					detail string
				}{
					{"missing", nil, "object does not exist"},
					{"truncated", good[:len(good)-10], fmt.Sprintf("is %d bytes, but the log records %d", len(good)-10, a.Size)},
					{"longer", append(slices.Clone(good), "more"...), fmt.Sprintf("is %d bytes, but the log records %d", len(good)+4, a.Size)},
				} {
					if c.body == nil {
						if err := st.Delete(ctx, key); err != nil {
							t.Fatal(err)
						}
					} else {
						putObject(t, st, key, c.body)
					}
					sc, err := snap.Scan(ctx, delta.ScanOptions{})
					if err == nil {
						for sc.Next() {
						}
						err = sc.Err()
						sc.Release()
					}
					wantErrNaming(t, c.name, err, key, c.detail)
				}
				putObject(t, st, key, good)
				if got, want := tableRows(t, snap), sortedStrings(row{1, "a", "x"}.String(), row{2, "b", "x"}.String()); !slices.Equal(got, want) {
					t.Fatalf("rows with the file restored = %q, want %q", got, want)
				}
			})
		}
	}
}
