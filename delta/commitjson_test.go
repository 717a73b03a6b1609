package delta_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
)

// update rewrites golden files under testdata/ (go test ./delta -run Golden -update).
// It is the one -update flag of the delta tests: do not declare another.
var update = flag.Bool("update", false, "rewrite testdata golden files")

var (
	uuidField = regexp.MustCompile(`"(id|txnId)":"[0-9a-f-]{36}"`)
)

// The exact bytes of the commits we write: create, append with txn, overwrite, set
// properties. metaData.id and commitInfo.txnId are random and masked.
func TestGoldenCommitJSON(t *testing.T) {
	tbl, st, _ := newTestTable(t, nil)
	ctx := context.Background()

	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": `["part"]`},
		OperationMetrics:    map[string]int64{"numFiles": 2, "numOutputRows": 30, "numOutputBytes": 230},
		Lineage:             &delta.Lineage{Pipeline: "sales", Stage: "ingest", RunID: "r1", Attempt: 1, SourceFiles: []string{"s3://in/a.csv"}}})
	a1 := addFile("part=a/f1.parquet", "a", 10)
	a1.ModificationTime = 1767322000000
	a2 := addFile("part=__HIVE_DEFAULT_PARTITION__/f2.parquet", "", 20)
	a2.PartitionValues["part"] = nil
	a2.ModificationTime = 1767322000000
	tx.AddFiles(a1, a2)
	tx.SetTxn("sales.ingest", 1)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	snap, _ = tbl.Snapshot(ctx)
	tx = tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE",
		OperationParameters: map[string]any{"mode": "Overwrite", "partitionBy": `["part"]`},
		OperationMetrics:    map[string]int64{"numFiles": 1, "numOutputRows": 5, "numOutputBytes": 105}})
	tx.ReadWholeTable()
	tx.RemoveAdds(snap.Files()...)
	a3 := addFile("part=b/f3.parquet", "b", 5)
	a3.ModificationTime = 1767322100000
	tx.AddFiles(a3)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.checkpointInterval": "5"}, nil); err != nil {
		t.Fatal(err)
	}

	var got bytes.Buffer
	for v := 0; v <= 3; v++ {
		key := fmt.Sprintf("warehouse/t/_delta_log/%020d.json", v)
		fmt.Fprintf(&got, "# %s\n", key)
		got.Write(uuidField.ReplaceAll(readObject(t, st, key), []byte(`"$1":"<uuid>"`)))
	}
	path := filepath.Join("testdata", "commits.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("commit JSON differs from %s (run with -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got.Bytes(), want)
	}
}
