package delta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// Fuzz targets for what the delta package parses from a table's files: commit JSON,
// _last_checkpoint, checkpoint Parquet and deletion vectors. Seeds live in
// testdata/fuzz/<target>; plain `go test` runs them, scripts/fuzz.sh fuzzes.

// fuzzAllocLimit bounds the heap one fuzz input may allocate (inputs are small).
const fuzzAllocLimit = 256 << 20

var quiet = Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

// fuzzFacts is what a snapshot says about its table, for comparing two loads.
type fuzzFacts struct {
	Version    int64
	Protocol   Protocol
	Metadata   Metadata
	Files      []string
	Tombstones []string
	Txns       map[string]int64
}

func factsOfSnapshot(s *Snapshot) fuzzFacts {
	f := fuzzFacts{Version: s.Version(), Protocol: *s.Protocol(), Metadata: *s.Metadata(), Txns: map[string]int64{}}
	for _, a := range s.Files() {
		f.Files = append(f.Files, fmt.Sprintf("%s %d %v %s dv=%s", a.Path, a.Size, partValues(a.PartitionValues), a.Stats, a.DeletionVector.UniqueID()))
	}
	for _, r := range s.Tombstones() {
		f.Tombstones = append(f.Tombstones, r.Path)
	}
	for id, x := range s.state.txns {
		f.Txns[id] = x.Version
	}
	return f
}

func partValues(pv map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range pv {
		if v == nil {
			out[k] = "<null>"
		} else {
			out[k] = *v
		}
	}
	return out
}

// FuzzCommitFile loads a table whose only commit is the input. Whatever loads must
// survive what a reader and a writer then do with it: every property helper, a
// checkpoint written from it must load back to the same state, and a commit on top
// must load as the next version.
func FuzzCommitFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, commit []byte) {
		if len(commit) > 1<<20 {
			return
		}
		testenv.MaxAlloc(t, fuzzAllocLimit, func() { fuzzCommitFile(t, commit) })
	})
}

func fuzzCommitFile(t *testing.T, commit []byte) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	put := func(key string, b []byte) {
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	put("t/_delta_log/00000000000000000000.json", commit)
	tbl, err := Open(ctx, st, "t", quiet)
	if err != nil {
		return
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatalf("Open succeeded, Snapshot failed: %v", err)
	}
	snap.NumRecords()
	snap.Properties()
	snap.ChangeDataFeedEnabled()
	snap.DeletionVectorsEnabled()
	snap.AppendOnly()
	snap.CheckpointInterval()
	snap.LogRetention()
	snap.DeletedFileRetention()
	snap.ExpiredLogCleanupEnabled()
	_, _ = snap.IdentityColumns()
	want := factsOfSnapshot(snap)

	if err := tbl.writeCheckpoint(ctx, snap); err == nil {
		again, err := Open(ctx, st, "t", quiet)
		if err != nil {
			t.Fatalf("the table does not load from its own checkpoint: %v", err)
		}
		s2, err := again.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s2.CheckpointVersion() != 0 {
			t.Fatalf("loaded from checkpoint %d, want 0", s2.CheckpointVersion())
		}
		got := factsOfSnapshot(s2)
		got.Tombstones, want.Tombstones = nil, nil // expired ones leave checkpoints
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("state from the checkpoint differs from the commit's:\n got %+v\nwant %+v", got, want)
		}
	}

	tx := tbl.NewTransaction(snap, TxOptions{Operation: "WRITE"})
	pv := map[string]*string{}
	for _, c := range snap.PartitionColumns() {
		pv[c] = nil
	}
	tx.AddFiles(&Add{Path: "fuzz-new.parquet", PartitionValues: pv, Size: 1, DataChange: true})
	v, err := tx.Commit(ctx)
	if err != nil {
		return // the writer gate may refuse the table
	}
	again, err := Open(ctx, st, "t", quiet)
	if err != nil {
		t.Fatalf("version %d committed on top of the input does not load: %v", v, err)
	}
	s3, err := again.Snapshot(ctx)
	if err != nil || s3.Version() != v {
		t.Fatalf("after a commit at version %d the table loads at %v (%v)", v, s3, err)
	}
}

// fuzzTable is a table in objects: three commits and a checkpoint at version 2.
func fuzzTable(t testing.TB) (map[string][]byte, fuzzFacts, []fuzzFacts) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	schema := &StructType{Fields: []*StructField{
		{Name: "id", Type: &PrimitiveType{Name: TypeLong}},
		{Name: "part", Type: &PrimitiveType{Name: TypeString}, Nullable: true},
	}}
	tbl, err := Create(ctx, st, "t", CreateOptions{Schema: schema, PartitionColumns: []string{"part"},
		Properties: map[string]string{"delta.checkpointInterval": "2"}}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, TxOptions{})
		p := fmt.Sprint(i % 2)
		tx.AddFiles(&Add{Path: fmt.Sprintf("part=%s/f%d.parquet", p, i), PartitionValues: map[string]*string{"part": &p},
			Size: int64(100 + i), DataChange: true, Stats: `{"numRecords":1}`})
		if i == 2 {
			tx.RemoveAdds(snap.Files()[0])
		}
		tx.SetTxn("app", int64(i))
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	objs := map[string][]byte{}
	infos, err := st.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		rc, err := st.Get(ctx, in.Key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		objs[in.Key] = b
	}
	if objs["t/_delta_log/_last_checkpoint"] == nil {
		t.Fatal("no checkpoint written")
	}
	var versions []fuzzFacts
	for v := range int64(4) {
		s, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, factsOfSnapshot(s))
	}
	return objs, versions[3], versions
}

func storeOf(t *testing.T, objs map[string][]byte) objectstore.Store {
	st := mem.New(mem.Config{})
	for k, b := range objs {
		if err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// FuzzLastCheckpoint replaces _last_checkpoint with the input. It is only a hint: every
// version must load to the same state whatever it says.
func FuzzLastCheckpoint(f *testing.F) {
	objs, _, versions := fuzzTable(f)
	f.Fuzz(func(t *testing.T, hint []byte) {
		if len(hint) > 1<<16 {
			return
		}
		o := maps.Clone(objs)
		o["t/_delta_log/_last_checkpoint"] = hint
		st := storeOf(t, o)
		ctx := context.Background()
		testenv.MaxAlloc(t, fuzzAllocLimit, func() {
			tbl, err := Open(ctx, st, "t", quiet)
			if err != nil {
				t.Fatalf("Open with _last_checkpoint %q: %v", hint, err)
			}
			for v, want := range versions {
				s, err := tbl.SnapshotAt(ctx, int64(v))
				if err != nil {
					t.Fatalf("SnapshotAt(%d) with _last_checkpoint %q: %v", v, hint, err)
				}
				if got := factsOfSnapshot(s); !reflect.DeepEqual(got, want) {
					t.Fatalf("version %d with _last_checkpoint %q:\n got %+v\nwant %+v", v, hint, got, want)
				}
			}
		})
	})
}

// FuzzCheckpointParquet decodes the input as a checkpoint file, and loads a table whose
// checkpoint at version 2 is the input: a checkpoint that cannot be read is skipped for
// the JSON commits, so the table either loads (with whatever the checkpoint says, if it
// reads) or fails with an error, never a panic.
func FuzzCheckpointParquet(f *testing.F) {
	objs, _, _ := fuzzTable(f)
	f.Fuzz(func(t *testing.T, cp []byte) {
		if len(cp) > 1<<20 {
			return
		}
		ctx := context.Background()
		testenv.MaxAlloc(t, fuzzAllocLimit, func() {
			acts, err := decodeCheckpointParquet(ctx, cp)
			if err == nil {
				// What decodes must encode as commit JSON and decode back the same.
				b, err := EncodeActions(acts)
				if err != nil {
					t.Fatalf("decoded actions do not encode: %v", err)
				}
				back, err := DecodeActions(bytes.NewReader(b))
				if err != nil || len(back) != len(acts) {
					t.Fatalf("decoded actions do not round-trip through JSON: %d → %d actions, %v", len(acts), len(back), err)
				}
			}
			o := maps.Clone(objs)
			o["t/_delta_log/00000000000000000002.checkpoint.parquet"] = cp
			if tbl, err := Open(ctx, storeOf(t, o), "t", quiet); err == nil {
				_, _ = tbl.SnapshotAt(ctx, 2)
			}
		})
	})
}

// FuzzDeletionVector loads a deletion vector from the input: inline (the input is the
// Z85 text) or as a vector file with the descriptor's offset, size and cardinality. A
// vector that loads has the cardinality its descriptor claims, and its rows can be
// applied to a file.
func FuzzDeletionVector(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, inline bool, offset, size int32, cardinality int64) {
		if len(data) > 1<<20 {
			return
		}
		ctx := context.Background()
		st := mem.New(mem.Config{})
		dv := &DeletionVector{StorageType: "i", PathOrInlineDv: string(data), SizeInBytes: size, Cardinality: cardinality}
		if !inline {
			good, err := writeDeletionVector(ctx, st, "t", roaring64.BitmapOf(1))
			if err != nil {
				t.Fatal(err)
			}
			key, err := dvFileKey(good, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, joinKey("t", key), bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			dv = &DeletionVector{StorageType: "u", PathOrInlineDv: good.PathOrInlineDv, Offset: &offset, SizeInBytes: size, Cardinality: cardinality}
		}
		testenv.MaxAlloc(t, fuzzAllocLimit, func() {
			bm, err := loadDeletionVector(ctx, st, "t", "", dv)
			if err != nil {
				return
			}
			if int64(bm.GetCardinality()) != cardinality {
				t.Fatalf("vector of %d rows loaded for a descriptor of %d", bm.GetCardinality(), cardinality)
			}
			rows, all := keptRowsOf(bm, 0, 4096, false)
			deleted := bm.Rank(4095) // rows deleted among the first 4096
			if all && deleted > 0 || !all && uint64(len(rows))+deleted != 4096 {
				t.Fatalf("of 4096 rows the vector deletes %d, keptRowsOf keeps %d (all=%v)", deleted, len(rows), all)
			}
			for _, r := range rows {
				if bm.Contains(uint64(r)) {
					t.Fatalf("row %d is kept but the vector deletes it", r)
				}
			}
		})
	})
}
