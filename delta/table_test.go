package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// testClock is a deterministic clock: every reading is one second after the previous.
type testClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func testSchema() *delta.StructType {
	return &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: false},
		{Name: "name", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
		{Name: "part", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
	}}
}

func testOptions(c *testClock) delta.Options {
	return delta.Options{Now: c.Now, EngineInfo: "orchestrator/test", UserName: "tester"}
}

// newTestTable creates a table partitioned by part in a fresh mem store whose clock is
// the table's, so commit file mtimes equal commit timestamps.
func newTestTable(t testing.TB, props map[string]string) (*delta.Table, *mem.Store, *testClock) {
	t.Helper()
	c := newTestClock()
	st := mem.New(mem.Config{Now: c.Now})
	tbl, err := delta.Create(context.Background(), st, "warehouse/t", delta.CreateOptions{
		Schema: testSchema(), PartitionColumns: []string{"part"}, Properties: props, Name: "t",
	}, testOptions(c))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return tbl, st, c
}

func strp(s string) *string { return &s }

func addFile(path, part string, records int) *delta.Add {
	return &delta.Add{
		Path:            path,
		PartitionValues: map[string]*string{"part": strp(part)},
		Size:            int64(100 + records),
		DataChange:      true,
		Stats:           fmt.Sprintf(`{"numRecords":%d}`, records),
	}
}

// appendFiles commits one blind append of the given adds on the latest snapshot.
func appendFiles(t testing.TB, tbl *delta.Table, adds ...*delta.Add) int64 {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds))}})
	tx.AddFiles(adds...)
	v, err := tx.Commit(ctx)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return v
}

func readObject(t testing.TB, st objectstore.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commitLines decodes a commit file into one generic map per line.
func commitLines(t testing.TB, st objectstore.Store, key string) []map[string]map[string]any {
	t.Helper()
	var out []map[string]map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(readObject(t, st, key)), []byte("\n")) {
		var m map[string]map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		out = append(out, m)
	}
	return out
}

func fileNames(adds []*delta.Add) []string {
	out := make([]string, len(adds))
	for i, a := range adds {
		out[i] = a.Path
	}
	return out
}

func TestCreateWritesVersionZero(t *testing.T) {
	tbl, st, _ := newTestTable(t, map[string]string{"delta.logRetentionDuration": "interval 60 days"})
	lines := commitLines(t, st, "warehouse/t/_delta_log/00000000000000000000.json")
	if len(lines) != 3 || lines[0]["commitInfo"] == nil || lines[1]["protocol"] == nil || lines[2]["metaData"] == nil {
		t.Fatalf("version 0 = %v; want commitInfo, protocol, metaData", lines)
	}
	ci := lines[0]["commitInfo"]
	if ci["operation"] != "CREATE TABLE" || ci["engineInfo"] != "orchestrator/test" || ci["userName"] != "tester" {
		t.Errorf("commitInfo = %v", ci)
	}
	if _, has := ci["readVersion"]; has {
		t.Errorf("CREATE TABLE commitInfo has a readVersion: %v", ci)
	}
	md := lines[2]["metaData"]
	if md["partitionColumns"].([]any)[0] != "part" || md["id"] == "" || md["createdTime"] == nil {
		t.Errorf("metaData = %v", md)
	}
	if f := md["format"].(map[string]any); f["provider"] != "parquet" {
		t.Errorf("format = %v", f)
	}

	// A second Table value on the same store sees the same state.
	re, err := delta.Open(context.Background(), st, "warehouse/t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := re.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version() != 0 || len(snap.Files()) != 0 {
		t.Errorf("reopened: version %d with %d files, want 0 and 0", snap.Version(), len(snap.Files()))
	}
	if p := snap.Protocol(); p.MinReaderVersion != 1 || p.MinWriterVersion != 2 {
		t.Errorf("protocol = %+v, want (1,2)", p)
	}
	if got := snap.Schema().String(); got != testSchema().String() {
		t.Errorf("schema = %s, want %s", got, testSchema())
	}
	if got := snap.LogRetention(); got != 60*24*time.Hour {
		t.Errorf("log retention = %v, want 60 days", got)
	}
	if got := snap.DeletedFileRetention(); got != 7*24*time.Hour {
		t.Errorf("deleted file retention = %v, want the 1 week default", got)
	}
	if got := snap.CheckpointInterval(); got != 10 {
		t.Errorf("checkpoint interval = %d, want 10", got)
	}

	_, err = delta.Create(context.Background(), st, "warehouse/t", delta.CreateOptions{Schema: testSchema()}, delta.Options{})
	if !errors.Is(err, delta.ErrTableExists) {
		t.Errorf("second Create error = %v, want ErrTableExists", err)
	}
	_ = tbl
}

func TestCreateProtocol(t *testing.T) {
	ntzSchema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "at", Type: &delta.PrimitiveType{Name: delta.TypeTimestampNTZ}, Nullable: true},
	}}
	identitySchema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Metadata: map[string]any{
			"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": false}},
	}}
	tests := []struct {
		name           string
		schema         *delta.StructType
		props          map[string]string
		reader, writer int
		readerFeatures []string
		writerFeatures []string
	}{
		{"plain", testSchema(), nil, 1, 2, nil, nil},
		{"cdf", testSchema(), map[string]string{"delta.enableChangeDataFeed": "true"}, 1, 7, nil,
			[]string{"appendOnly", "invariants", "changeDataFeed"}},
		{"identity", identitySchema, nil, 1, 7, nil, []string{"appendOnly", "invariants", "identityColumns"}},
		{"timestamp_ntz", ntzSchema, nil, 3, 7, []string{"timestampNtz"}, []string{"appendOnly", "invariants", "timestampNtz"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := delta.Create(context.Background(), mem.New(mem.Config{}), "", delta.CreateOptions{Schema: tc.schema, Properties: tc.props}, delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p := snap.Protocol()
			if p.MinReaderVersion != tc.reader || p.MinWriterVersion != tc.writer ||
				!sameStrings(p.ReaderFeatures, tc.readerFeatures) || !sameStrings(p.WriterFeatures, tc.writerFeatures) {
				t.Errorf("protocol = %+v, want (%d,%d) %v %v", p, tc.reader, tc.writer, tc.readerFeatures, tc.writerFeatures)
			}
		})
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		co   delta.CreateOptions
		want string
	}{
		{"no schema", delta.CreateOptions{}, "schema has no columns"},
		{"unknown partition column", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"nope"}}, `partition column "nope"`},
		{"bad interval", delta.CreateOptions{Schema: testSchema(), Properties: map[string]string{"delta.checkpointInterval": "0"}}, "delta.checkpointInterval"},
		{"bad retention", delta.CreateOptions{Schema: testSchema(), Properties: map[string]string{"delta.logRetentionDuration": "30 fortnights"}}, "unknown unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := delta.Create(context.Background(), mem.New(mem.Config{}), "t", tc.co, delta.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestOpenWithoutLogFails(t *testing.T) {
	_, err := delta.Open(context.Background(), mem.New(mem.Config{}), "nothing/here", delta.Options{})
	if err == nil || !strings.Contains(err.Error(), "no _delta_log") {
		t.Fatalf("Open error = %v, want one saying there is no _delta_log", err)
	}
}

func TestCommitsAppendOverwriteAndReopen(t *testing.T) {
	tbl, st, _ := newTestTable(t, nil)
	ctx := context.Background()
	appendFiles(t, tbl, addFile("part=a/f1.parquet", "a", 10))
	appendFiles(t, tbl, addFile("part=b/f2.parquet", "b", 20), addFile("part=a/f3.parquet", "a", 5))

	// Overwrite: read the whole table, remove everything, add one file.
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", OperationParameters: map[string]any{"mode": "Overwrite"}})
	tx.ReadWholeTable()
	tx.RemoveAdds(snap.Files()...)
	tx.AddFiles(addFile("part=c/f4.parquet", "c", 7))
	v, err := tx.Commit(ctx)
	if err != nil || v != 3 {
		t.Fatalf("overwrite = %d, %v; want version 3", v, err)
	}

	re, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := re.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileNames(latest.Files()); len(got) != 1 || got[0] != "part=c/f4.parquet" {
		t.Errorf("files after overwrite = %v", got)
	}
	tombs := latest.Tombstones()
	if len(tombs) != 3 {
		t.Fatalf("tombstones = %d, want 3", len(tombs))
	}
	for _, r := range tombs {
		if !r.ExtendedFileMetadata || r.Size == nil || r.PartitionValues["part"] == nil || r.DeletionTimestamp == nil || !r.DataChange {
			t.Errorf("tombstone %+v lacks extended metadata", r)
		}
	}
	v2, err := re.SnapshotAt(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileNames(v2.Files()); strings.Join(got, ",") != "part=a/f1.parquet,part=a/f3.parquet,part=b/f2.parquet" {
		t.Errorf("files at v2 = %v (want sorted by path)", got)
	}
	if n, ok := v2.NumRecords(); !ok || n != 35 {
		t.Errorf("records at v2 = %d %v, want 35", n, ok)
	}

	// commitInfo shapes: blind append vs overwrite.
	app := commitLines(t, st, "warehouse/t/_delta_log/00000000000000000002.json")[0]["commitInfo"]
	if app["isBlindAppend"] != true || app["readVersion"] != float64(1) || app["isolationLevel"] != "Serializable" {
		t.Errorf("append commitInfo = %v", app)
	}
	if m := app["operationMetrics"].(map[string]any); m["numFiles"] != "2" {
		t.Errorf("operationMetrics = %v, want numFiles as the string \"2\"", m)
	}
	ow := commitLines(t, st, "warehouse/t/_delta_log/00000000000000000003.json")[0]["commitInfo"]
	if ow["isBlindAppend"] != false || ow["readVersion"] != float64(2) {
		t.Errorf("overwrite commitInfo = %v", ow)
	}
}

func TestAppendOnlyRejectsDataRemoves(t *testing.T) {
	tbl, _, _ := newTestTable(t, map[string]string{"delta.appendOnly": "true"})
	appendFiles(t, tbl, addFile("part=a/f1.parquet", "a", 1))
	snap, _ := tbl.Snapshot(context.Background())
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "DELETE"})
	tx.RemoveAdds(snap.Files()...)
	if _, err := tx.Commit(context.Background()); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("remove on append-only table: err = %v, want an append-only error", err)
	}
	// dataChange=false rewrites (compaction) stay allowed.
	tx = tbl.NewTransaction(snap, delta.TxOptions{Operation: "OPTIMIZE"})
	sz := int64(101)
	tx.RemoveFiles(&delta.Remove{Path: "part=a/f1.parquet", DataChange: false, Size: &sz})
	c := addFile("part=a/f2.parquet", "a", 1)
	c.DataChange = false
	tx.AddFiles(c)
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatalf("compaction on append-only table: %v", err)
	}
}

func TestAddWithoutPartitionValueRejected(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil)
	snap, _ := tbl.Snapshot(context.Background())
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	tx.AddFiles(&delta.Add{Path: "x.parquet", Size: 1, DataChange: true})
	if _, err := tx.Commit(context.Background()); err == nil || !strings.Contains(err.Error(), `partition column "part"`) {
		t.Fatalf("err = %v, want a missing partition value error", err)
	}
}

func TestTxnVersion(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil)
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		snap, _ := tbl.Snapshot(ctx)
		tx := tbl.NewTransaction(snap, delta.TxOptions{})
		tx.SetTxn("ingest-orders", i*10)
		tx.AddFiles(addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := tbl.SnapshotAt(ctx, 2)
	if v, ok := snap.TxnVersion("ingest-orders"); !ok || v != 20 {
		t.Errorf("TxnVersion at v2 = %d %v, want 20", v, ok)
	}
	if _, ok := snap.TxnVersion("other"); ok {
		t.Errorf("TxnVersion(other) found")
	}
}

func TestSetProperties(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil)
	ctx := context.Background()
	v, err := tbl.SetProperties(ctx, map[string]string{"delta.enableChangeDataFeed": "true", "owner": "data"}, nil)
	if err != nil || v != 1 {
		t.Fatalf("SetProperties = %d, %v", v, err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if !snap.ChangeDataFeedEnabled() || snap.Properties()["owner"] != "data" {
		t.Errorf("properties = %v", snap.Properties())
	}
	if !snap.Protocol().HasWriterFeature("changeDataFeed") {
		t.Errorf("protocol %+v lacks changeDataFeed after enabling it", snap.Protocol())
	}
	if _, err := tbl.SetProperties(ctx, nil, []string{"owner"}); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if _, has := snap.Properties()["owner"]; has {
		t.Errorf("owner still set: %v", snap.Properties())
	}
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.checkpointInterval": "-1"}, nil); err == nil {
		t.Errorf("a negative checkpoint interval was accepted")
	}
	hist, err := tbl.History(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Operation != "UNSET TBLPROPERTIES" || hist[1].Operation != "SET TBLPROPERTIES" {
		t.Errorf("history = %+v", hist)
	}
}

func TestHistoryNewestFirstWithLineage(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		snap, _ := tbl.Snapshot(ctx)
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE",
			Lineage: &delta.Lineage{Pipeline: "sales", Stage: "ingest", RunID: fmt.Sprintf("run-%d", i), Attempt: 1, SourceFiles: []string{"in.csv"}}})
		tx.AddFiles(addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", i))
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 4 {
		t.Fatalf("history has %d entries, want 4", len(hist))
	}
	for i, e := range hist {
		if want := int64(3 - i); e.Version != want {
			t.Errorf("history[%d].Version = %d, want %d", i, e.Version, want)
		}
		if i > 0 && !e.Timestamp.Before(hist[i-1].Timestamp) {
			t.Errorf("timestamps not increasing with versions: %v then %v", e.Timestamp, hist[i-1].Timestamp)
		}
		if e.EngineInfo != "orchestrator/test" || e.UserName != "tester" {
			t.Errorf("v%d engine/user = %q/%q", e.Version, e.EngineInfo, e.UserName)
		}
	}
	if l := hist[0].Lineage; l == nil || l.RunID != "run-3" || l.Pipeline != "sales" || l.SourceFiles[0] != "in.csv" {
		t.Errorf("lineage of v3 = %+v", l)
	}
	if hist[0].ReadVersion == nil || *hist[0].ReadVersion != 2 || hist[0].IsBlindAppend == nil || !*hist[0].IsBlindAppend {
		t.Errorf("v3 readVersion/isBlindAppend = %v/%v", hist[0].ReadVersion, hist[0].IsBlindAppend)
	}
	if hist[3].Operation != "CREATE TABLE" || hist[3].Lineage != nil {
		t.Errorf("v0 = %+v", hist[3])
	}
	if short, _ := tbl.History(ctx, 2); len(short) != 2 || short[0].Version != 3 {
		t.Errorf("History(2) = %+v", short)
	}
}

func TestMissingVersionIsNamed(t *testing.T) {
	tbl, st, _ := newTestTable(t, nil)
	for i := 1; i <= 4; i++ {
		appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
	}
	ctx := context.Background()
	if err := st.Delete(ctx, "warehouse/t/_delta_log/00000000000000000002.json"); err != nil {
		t.Fatal(err)
	}
	_, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
	if err == nil || !strings.Contains(err.Error(), "missing version 2") {
		t.Fatalf("Open error = %v, want it to name the missing version 2", err)
	}
	_, err = tbl.SnapshotAt(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), "missing version 2") {
		t.Fatalf("SnapshotAt(3) error = %v, want it to name the missing version 2", err)
	}
	if _, err := tbl.SnapshotAt(ctx, 1); err != nil {
		t.Errorf("SnapshotAt(1) before the gap: %v", err)
	}
	if _, err := tbl.SnapshotAt(ctx, 9); err == nil || !strings.Contains(err.Error(), "latest version is 4") {
		t.Errorf("SnapshotAt(9) error = %v, want one naming the latest version", err)
	}
}

func TestWriterGateRefusesUnsupportedFeatures(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil)
	ctx := context.Background()
	snap, _ := tbl.Snapshot(ctx)
	// Upgrading to a protocol with a writer feature we do not implement is refused.
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "UPGRADE PROTOCOL"})
	tx.UpdateProtocol(&delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "checkConstraints"}})
	_, err := tx.Commit(ctx)
	var fe *delta.UnsupportedFeatureError
	if !errors.As(err, &fe) || fe.Feature != "checkConstraints" || !strings.Contains(err.Error(), "unsupported table feature: checkConstraints") {
		t.Fatalf("err = %v, want unsupported table feature: checkConstraints", err)
	}
}

func TestCDCActionsNeedChangeDataFeed(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		props := map[string]string{}
		if enabled {
			props["delta.enableChangeDataFeed"] = "true"
		}
		tbl, _, _ := newTestTable(t, props)
		snap, _ := tbl.Snapshot(context.Background())
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "UPDATE"})
		tx.AddCDC(&delta.CDC{Path: "_change_data/part=a/cdc-1.parquet", PartitionValues: map[string]*string{"part": strp("a")}, Size: 10})
		_, err := tx.Commit(context.Background())
		if enabled && err != nil {
			t.Errorf("cdc with the feed enabled: %v", err)
		}
		if !enabled && (err == nil || !strings.Contains(err.Error(), "change data feed")) {
			t.Errorf("cdc without the feed: err = %v", err)
		}
	}
}
