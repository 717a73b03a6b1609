package delta_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// goldenDir finds the golden tables in testdata/golden (testenv.GoldenDir).
func goldenDir(t testing.TB) string { return testenv.GoldenDir(t) }

type goldenSchemaField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

type goldenHistory struct {
	Version            int64          `json:"version"`
	Operation          *string        `json:"operation"`
	CommitInfoTS       *int64         `json:"commitInfo_timestamp"`
	InCommitTimestamp  *int64         `json:"inCommitTimestamp"`
	OperationMetrics   map[string]any `json:"operationMetrics"`
	LiveFiles          *int           `json:"live_files"`
	LiveRecords        *int64         `json:"live_records"`
	VisibleRows        *int64         `json:"visible_rows"` // live rows less those deletion vectors delete
	HasLiveRecordsNull bool           `json:"-"`
}

type goldenTable struct {
	TableRoot     string `json:"table_root"`
	LatestVersion int64  `json:"latest_version"`
	Protocol      *struct {
		MinReaderVersion int      `json:"minReaderVersion"`
		MinWriterVersion int      `json:"minWriterVersion"`
		ReaderFeatures   []string `json:"readerFeatures"`
		WriterFeatures   []string `json:"writerFeatures"`
	} `json:"protocol"`
	EffectiveReader []string `json:"effective_reader_features"`
	EffectiveWriter []string `json:"effective_writer_features"`
	Metadata        *struct {
		ID               string              `json:"id"`
		PartitionColumns []string            `json:"partitionColumns"`
		Configuration    map[string]string   `json:"configuration"`
		Schema           []goldenSchemaField `json:"schema"`
	} `json:"metadata"`
	LiveFiles        *int                `json:"live_files"`
	LiveRecords      *int64              `json:"live_records_from_stats"`
	Tombstones       *int                `json:"tombstones"`
	DerivedLiveFiles *int                `json:"live_files_derived_from_last_checkpoint"`
	Checkpoints      map[string][]string `json:"checkpoints"`
	History          []goldenHistory     `json:"history"`
}

func loadGolden(t testing.TB) (string, map[string]goldenTable) {
	dir := goldenDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]goldenTable
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// openDir opens the table in a directory through the fs store.
func openDir(t testing.TB, dir string) (*delta.Table, error) {
	t.Helper()
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return delta.Open(context.Background(), st, "", delta.Options{})
}

// Tables the reader must refuse, with the error text it must give.
var goldenRefused = map[string]string{
	"delta-golden/deltalog-invalid-protocol-version": "unsupported protocol: minReaderVersion 99",
	"delta-golden/versions-not-contiguous":           "missing version 1",
}

func TestGoldenFacts(t *testing.T) {
	dir, tables := loadGolden(t)
	ctx := context.Background()
	names := make([]string, 0, len(tables))
	for k := range tables {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		g := tables[name]
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(dir, filepath.FromSlash(g.TableRoot))
			tbl, err := openDir(t, root)
			if want, refused := goldenRefused[name]; refused {
				if err == nil {
					t.Fatalf("Open succeeded; want an error containing %q", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Open error = %q; want it to contain %q", err, want)
				}
				var fe *delta.UnsupportedFeatureError
				if strings.HasPrefix(want, "unsupported") && !errors.As(err, &fe) {
					t.Errorf("error %v is not an *UnsupportedFeatureError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version() != g.LatestVersion {
				t.Errorf("latest version = %d, want %d", snap.Version(), g.LatestVersion)
			}
			checkProtocol(t, snap, g)
			// The snapshot must come from the newest checkpoint: classic, multi-part or
			// UUID-named V2 (whose file actions live in sidecars).
			wantCP := int64(-1)
			for v, kinds := range g.Checkpoints {
				if strings.HasPrefix(kinds[0], "classic") || strings.HasPrefix(kinds[0], "multipart") || strings.HasPrefix(kinds[0], "v2-uuid") {
					n, _ := strconv.ParseInt(v, 10, 64)
					wantCP = max(wantCP, n)
				}
			}
			if snap.CheckpointVersion() != wantCP {
				t.Errorf("loaded from checkpoint %d, want %d", snap.CheckpointVersion(), wantCP)
			}
			checkMetadata(t, snap, g)
			wantFiles := g.LiveFiles
			if wantFiles == nil {
				wantFiles = g.DerivedLiveFiles
			}
			if wantFiles != nil && len(snap.Files()) != *wantFiles {
				t.Errorf("live files = %d, want %d", len(snap.Files()), *wantFiles)
			}
			if g.LiveFiles != nil {
				n, ok := snap.NumRecords()
				switch {
				case g.LiveRecords == nil && ok:
					t.Errorf("records from stats = %d, want unknown (some file lacks stats)", n)
				case g.LiveRecords != nil && (!ok || n != *g.LiveRecords):
					t.Errorf("records from stats = %d (known %v), want %d", n, ok, *g.LiveRecords)
				}
			}
			if g.Tombstones != nil && snap.CheckpointVersion() < 0 && len(snap.Tombstones()) != *g.Tombstones {
				t.Errorf("tombstones = %d, want %d", len(snap.Tombstones()), *g.Tombstones)
			}
			checkVersions(t, tbl, g)
			checkHistory(t, tbl, g)
		})
	}
}

func checkProtocol(t *testing.T, snap *delta.Snapshot, g goldenTable) {
	t.Helper()
	if g.Protocol == nil {
		return
	}
	p := snap.Protocol()
	if p.MinReaderVersion != g.Protocol.MinReaderVersion || p.MinWriterVersion != g.Protocol.MinWriterVersion {
		t.Errorf("protocol = (%d,%d), want (%d,%d)", p.MinReaderVersion, p.MinWriterVersion, g.Protocol.MinReaderVersion, g.Protocol.MinWriterVersion)
	}
	if !sameStrings(p.ReaderFeatures, g.Protocol.ReaderFeatures) || !sameStrings(p.WriterFeatures, g.Protocol.WriterFeatures) {
		t.Errorf("features = %v/%v, want %v/%v", p.ReaderFeatures, p.WriterFeatures, g.Protocol.ReaderFeatures, g.Protocol.WriterFeatures)
	}
	if got := p.EffectiveReaderFeatures(); !sameStrings(got, g.EffectiveReader) {
		t.Errorf("effective reader features = %v, want %v", got, g.EffectiveReader)
	}
	if got := p.EffectiveWriterFeatures(); !sameStrings(got, g.EffectiveWriter) {
		t.Errorf("effective writer features = %v, want %v", got, g.EffectiveWriter)
	}
}

func checkMetadata(t *testing.T, snap *delta.Snapshot, g goldenTable) {
	t.Helper()
	if g.Metadata == nil {
		return
	}
	md := snap.Metadata()
	if md.ID != g.Metadata.ID {
		t.Errorf("metadata id = %q, want %q", md.ID, g.Metadata.ID)
	}
	if !slices.Equal(snap.PartitionColumns(), g.Metadata.PartitionColumns) {
		t.Errorf("partition columns = %v, want %v", snap.PartitionColumns(), g.Metadata.PartitionColumns)
	}
	props := snap.Properties()
	if len(props) != len(g.Metadata.Configuration) {
		t.Errorf("configuration = %v, want %v", props, g.Metadata.Configuration)
	}
	for k, v := range g.Metadata.Configuration {
		if props[k] != v {
			t.Errorf("configuration[%s] = %q, want %q", k, props[k], v)
		}
	}
	fields := snap.Schema().Fields
	if len(fields) != len(g.Metadata.Schema) {
		t.Fatalf("schema has %d fields, want %d", len(fields), len(g.Metadata.Schema))
	}
	for i, f := range fields {
		w := g.Metadata.Schema[i]
		if f.Name != w.Name || f.Type.String() != w.Type || f.Nullable != w.Nullable {
			t.Errorf("field %d = %s %s nullable=%v, want %s %s nullable=%v", i, f.Name, f.Type, f.Nullable, w.Name, w.Type, w.Nullable)
		}
	}
}

// checkVersions loads every version the expected history has facts for.
func checkVersions(t *testing.T, tbl *delta.Table, g goldenTable) {
	t.Helper()
	ctx := context.Background()
	for _, h := range g.History {
		s, err := tbl.SnapshotAt(ctx, h.Version)
		if h.LiveFiles == nil {
			// The log was cleaned: only versions from the checkpoint on load.
			continue
		}
		if err != nil {
			t.Errorf("SnapshotAt(%d): %v", h.Version, err)
			continue
		}
		if len(s.Files()) != *h.LiveFiles {
			t.Errorf("v%d: live files = %d, want %d", h.Version, len(s.Files()), *h.LiveFiles)
		}
		n, ok := s.NumRecords()
		if h.LiveRecords != nil && (!ok || n != *h.LiveRecords) {
			t.Errorf("v%d: records = %d (known %v), want %d", h.Version, n, ok, *h.LiveRecords)
		}
		if h.VisibleRows != nil {
			if got := tableRows2(t, s); got != *h.VisibleRows {
				t.Errorf("v%d: scan returns %d rows, want %d", h.Version, got, *h.VisibleRows)
			}
		}
	}
}

func checkHistory(t *testing.T, tbl *delta.Table, g goldenTable) {
	t.Helper()
	hist, err := tbl.History(context.Background(), 0)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(hist) != len(g.History) {
		t.Fatalf("history has %d entries, want %d", len(hist), len(g.History))
	}
	for i, e := range hist {
		w := g.History[len(g.History)-1-i]
		if e.Version != w.Version {
			t.Errorf("history[%d].Version = %d, want %d (newest first)", i, e.Version, w.Version)
			continue
		}
		wantOp := ""
		if w.Operation != nil {
			wantOp = *w.Operation
		}
		if e.Operation != wantOp {
			t.Errorf("v%d operation = %q, want %q", e.Version, e.Operation, wantOp)
		}
		if w.CommitInfoTS != nil && (e.CommitInfo == nil || e.CommitInfo.Timestamp != *w.CommitInfoTS) {
			t.Errorf("v%d commitInfo.timestamp differs from %d", e.Version, *w.CommitInfoTS)
		}
		if w.InCommitTimestamp != nil && e.Timestamp.UnixMilli() != *w.InCommitTimestamp {
			t.Errorf("v%d timestamp = %d, want the in-commit timestamp %d", e.Version, e.Timestamp.UnixMilli(), *w.InCommitTimestamp)
		}
		for k, v := range w.OperationMetrics {
			if got := e.OperationMetrics[k]; got != v {
				t.Errorf("v%d operationMetrics[%s] = %v, want %v", e.Version, k, got, v)
			}
		}
	}
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A cleaned log cannot travel to versions before its oldest checkpoint.
func TestGoldenCleanedLogNamesEarliestVersion(t *testing.T) {
	dir, tables := loadGolden(t)
	g := tables["delta-rs/checkpoint-cdf-table"]
	tbl, err := openDir(t, filepath.Join(dir, filepath.FromSlash(g.TableRoot)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tbl.SnapshotAt(context.Background(), 2)
	if err == nil || !strings.Contains(err.Error(), "earliest available version is 3") {
		t.Fatalf("SnapshotAt(2) error = %v; want one naming the earliest available version 3", err)
	}
	s, err := tbl.SnapshotAt(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.CheckpointVersion() != 3 {
		t.Errorf("v3 loaded from checkpoint %d, want 3", s.CheckpointVersion())
	}
}
