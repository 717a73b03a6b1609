package delta_test

import (
	"context"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// sameJSON compares two JSON texts as values: numbers by value (Spark prints -3.0E10
// where Go prints -30000000000), timestamps by instant (Spark "2024-02-29
// 12:34:56.789+00:00", ours RFC 3339), everything else exactly.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	for _, p := range []struct {
		s   string
		out *any
	}{{got, &g}, {want, &w}} {
		dec := json.NewDecoder(strings.NewReader(p.s))
		dec.UseNumber()
		if err := dec.Decode(p.out); err != nil {
			t.Errorf("not JSON: %q: %v", p.s, err)
			return false
		}
	}
	return reflect.DeepEqual(normJSON(g), normJSON(w))
}

func normJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return string(x)
		}
		return r.RatString()
	case string:
		for _, layout := range []string{"2006-01-02 15:04:05.999999Z07:00", time.RFC3339Nano} {
			if ts, err := time.Parse(layout, x); err == nil {
				return ts.UTC().Format(time.RFC3339Nano)
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = normJSON(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normJSON(x[k])
		}
	}
	return v
}

// A table with VARIANT columns written by Spark (testdata/golden/spark-variant, made by
// its generate.py) reads at every version with the values Spark's to_json gives, as
// Arrow's variant extension type; writing to it is refused by name.
func TestSparkVariantTable(t *testing.T) {
	dir := filepath.Join(goldenDir(t), "spark-variant")
	var exp struct {
		Versions map[string][]struct {
			ID int64   `json:"id"`
			V  *string `json:"v"`
			A  *string `json:"a"`
		} `json:"versions"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	tbl, err := openDir(t, filepath.Join(dir, "table"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for ver, want := range exp.Versions {
		v, _ := strconv.ParseInt(ver, 10, 64)
		snap, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Schema().Field("v").Type.String() != "variant" {
			t.Fatalf("column v has type %s", snap.Schema().Field("v").Type)
		}
		sc, err := snap.Scan(ctx, delta.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64][2]*string{}
		for sc.Next() {
			rec := sc.RecordBatch()
			if name := rec.Schema().Field(1).Type.String(); !strings.Contains(name, "variant") {
				t.Fatalf("v is read as %s, want Arrow's variant extension type", name)
			}
			ids := rec.Column(0).(*array.Int64)
			for i := 0; i < int(rec.NumRows()); i++ {
				var cells [2]*string
				for c := 1; c <= 2; c++ {
					// As the CLI and the pages show it: JSON text, NULL apart from null.
					if val := rowtext.At(rec.Column(c), i); !val.Null {
						cells[c-1] = &val.Text
					}
				}
				got[ids.Value(i)] = cells
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		sc.Release()
		if len(got) != len(want) {
			t.Errorf("v%d: %d rows, want %d", v, len(got), len(want))
		}
		for _, w := range want {
			g := got[w.ID]
			for c, wc := range []*string{w.V, w.A} {
				switch {
				case (g[c] == nil) != (wc == nil):
					t.Errorf("v%d id %d column %d: got %v, want %v", v, w.ID, c+1, deref(g[c]), deref(wc))
				case g[c] != nil && !sameJSON(t, *g[c], *wc):
					t.Errorf("v%d id %d column %d: got %s, want %s", v, w.ID, c+1, *g[c], *wc)
				}
			}
		}
	}
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(&delta.Add{Path: "x.parquet", Size: 1, DataChange: true})
	if _, err := tx.Commit(ctx); err == nil || !strings.Contains(err.Error(), "unsupported table feature: variantType (writes refused)") {
		t.Errorf("write to a variant table: %v; want variantType refused", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
