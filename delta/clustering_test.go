package delta_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// sparkClusteredLog is version 0 of a table Spark 4.1 + Delta 4.4 creates with CLUSTER
// BY (id, name) (its commitInfo shortened), with the given table configuration.
func sparkClusteredLog(config string) string {
	return `{"commitInfo":{"timestamp":1796363931000,"operation":"CREATE TABLE","engineInfo":"Apache-Spark/4.1.1 Delta-Lake/4.4.0"}}
{"metaData":{"id":"c1","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}},{\"name\":\"name\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}},{\"name\":\"part\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":` + config + `,"createdTime":1796363931000}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["domainMetadata","clustering","invariants","appendOnly"]}}
{"domainMetadata":{"domain":"delta.clustering","configuration":"{\"clusteringColumns\":[[\"id\"],[\"name\"]],\"domainName\":\"delta.clustering\"}","removed":false}}
{"domainMetadata":{"domain":"com.example.app","configuration":"{\"x\":1}","removed":false}}
`
}

func openClustered(t *testing.T, config string) *delta.Table {
	t.Helper()
	ctx := context.Background()
	st := mem.New(mem.Config{})
	body := sparkClusteredLog(config)
	if err := st.Put(ctx, "c/_delta_log/00000000000000000000.json", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Open(ctx, st, "c", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// A Spark-clustered table takes our appends and DML: the clustering domain and every
// other domain stay as they are, in the commits' replay and in our checkpoints, and the
// files we add carry statistics on the clustering columns.
func TestClusteredTableWrites(t *testing.T) {
	ctx := context.Background()
	tbl := openClustered(t, `{"delta.checkpointInterval":"2"}`)
	snap, _ := tbl.Snapshot(ctx)
	cols, err := snap.ClusteringColumns()
	if err != nil || strings.Join(cols, ",") != "id,name" {
		t.Fatalf("clustering columns %v, %v", cols, err)
	}
	for i := 0; i < 3; i++ {
		rec := record(t, snap.Schema(), []row{{int64(i), "n", "x"}, {int64(i + 10), "m", "y"}}, nil)
		_, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}})
		rec.Release()
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	where, err := expr.Parse("id = 1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: where}); err != nil {
		t.Fatal(err)
	}
	fresh, err := delta.Open(ctx, tbl.Store(), "c", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := fresh.Snapshot(ctx)
	if s.CheckpointVersion() != 4 {
		t.Errorf("loaded from checkpoint %d, want 4", s.CheckpointVersion())
	}
	for _, d := range []struct{ domain, want string }{
		{"delta.clustering", `{"clusteringColumns":[["id"],["name"]],"domainName":"delta.clustering"}`},
		{"com.example.app", `{"x":1}`},
	} {
		if got, ok := s.DomainMetadata(d.domain); !ok || got != d.want {
			t.Errorf("domain %s after our commits and checkpoint = %q (%v), want %q", d.domain, got, ok, d.want)
		}
	}
	if got := tableRows(t, s); len(got) != 5 {
		t.Errorf("rows %v, want 5", got)
	}
	for _, a := range s.Files() {
		if !strings.Contains(a.Stats, `"nullCount":{"id":0,"name":0`) {
			t.Errorf("file %s stats %s lack the clustering columns", a.Path, a.Stats)
		}
	}
}

// A file without statistics on a clustering column is refused, naming it.
func TestClusteredTableNeedsStats(t *testing.T) {
	ctx := context.Background()
	tbl := openClustered(t, `{}`)
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(&delta.Add{Path: "f.parquet", Size: 10, DataChange: true, Stats: `{"numRecords":1,"nullCount":{"id":0}}`})
	_, err := tx.Commit(ctx)
	if err == nil || !strings.Contains(err.Error(), "no statistics on clustering column name") {
		t.Fatalf("commit error = %v; want it to name clustering column name", err)
	}
	// Stats limited to the first column by the table's property: the append is refused.
	tbl = openClustered(t, `{"delta.dataSkippingNumIndexedCols":"1"}`)
	snap, _ = tbl.Snapshot(ctx)
	rec := record(t, snap.Schema(), []row{{1, "n", "x"}}, nil)
	defer rec.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err == nil || !strings.Contains(err.Error(), "clustering column name") {
		t.Fatalf("append error = %v; want it to name clustering column name", err)
	}
}

// Create with ClusterBy makes a clustered table as Spark does: the clustering and
// domainMetadata writer features, the delta.clustering domain with the columns as
// paths, clusterBy in the CREATE TABLE parameters; our appends then carry statistics on
// them. Columns that cannot be clustered on are refused, naming them.
func TestCreateClusteredTable(t *testing.T) {
	ctx := context.Background()
	sch := &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true},
		{Name: "name", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true},
		{Name: "s", Type: &delta.StructType{Fields: []*delta.StructField{{Name: "a", Type: &delta.PrimitiveType{Name: delta.TypeDate}, Nullable: true}}}, Nullable: true},
		{Name: "flag", Type: &delta.PrimitiveType{Name: delta.TypeBoolean}, Nullable: true},
	}}
	st := mem.New(mem.Config{})
	tbl, err := delta.Create(ctx, st, "c", delta.CreateOptions{Schema: sch, ClusterBy: []string{"id", "s.a"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if p := snap.Protocol(); p.MinWriterVersion != 7 || !slices.Contains(p.WriterFeatures, "clustering") || !slices.Contains(p.WriterFeatures, "domainMetadata") {
		t.Errorf("protocol %+v lacks clustering and domainMetadata", p)
	}
	if conf, _ := snap.DomainMetadata("delta.clustering"); conf != `{"clusteringColumns":[["id"],["s","a"]],"domainName":"delta.clustering"}` {
		t.Errorf("delta.clustering = %s", conf)
	}
	if cols, err := snap.ClusteringColumns(); err != nil || !slices.Equal(cols, []string{"id", "s.a"}) {
		t.Errorf("clustering columns %v, %v", cols, err)
	}
	h, _ := tbl.History(ctx, 1)
	if got := h[0].OperationParameters["clusterBy"]; got != `["id","s.a"]` {
		t.Errorf("CREATE TABLE clusterBy parameter %v", got)
	}
	reopened, err := delta.Open(ctx, st, "c", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := reopened.Snapshot(ctx); len(s.Files()) != 0 {
		t.Errorf("files %v", s.Files())
	}
	for _, tc := range []struct {
		name  string
		co    delta.CreateOptions
		wants string
	}{
		{"partitioned too", delta.CreateOptions{Schema: sch, ClusterBy: []string{"id"}, PartitionColumns: []string{"name"}}, "partitioned or clustered, not both"},
		{"unknown column", delta.CreateOptions{Schema: sch, ClusterBy: []string{"nope"}}, `column "nope" is not a column`},
		{"struct", delta.CreateOptions{Schema: sch, ClusterBy: []string{"s"}}, `column "s" is not a column`},
		{"boolean", delta.CreateOptions{Schema: sch, ClusterBy: []string{"flag"}}, "flag has type boolean"},
		{"beyond the stats columns", delta.CreateOptions{Schema: sch, ClusterBy: []string{"name"}, Properties: map[string]string{"delta.dataSkippingNumIndexedCols": "1"}}, "beyond the 1 that get statistics"},
		{"five", delta.CreateOptions{Schema: sch, ClusterBy: []string{"id", "name", "s.a", "id", "name"}}, "at most 4"},
	} {
		_, err := delta.Create(ctx, mem.New(mem.Config{}), "x", tc.co, delta.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.wants)
		}
	}
}
