package lineage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

const specYAML = `pipeline: p
warehouse: WAREHOUSE
tables:
  raw.t: {columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]}
stages:
  - {name: load, kind: ingest, source: "SOURCE", format: csv, target: raw.t}
`

func parse(t *testing.T, warehouse, source string) *pipelines.Spec {
	t.Helper()
	src := strings.NewReplacer("WAREHOUSE", warehouse, "SOURCE", source).Replace(specYAML)
	sp, err := pipelines.Parse("/p/p.yaml", []byte(src), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// Datasets are named as OpenLineage's naming spec says: a local directory is namespace
// file and its absolute path; S3 is s3://bucket and the key; an http source loses its
// user info and query (where secrets go).
func TestDatasetNames(t *testing.T) {
	cases := []struct {
		warehouse, source    string
		tableNS, tableName   string
		sourceNS, sourceName string
	}{
		{"/data/wh", "/data/landing/*.csv", "file", "/data/wh/raw/t", "file", "/data/landing"},
		{"file:///data/wh", "/data/landing/2026/**/*.csv", "file", "/data/wh/raw/t", "file", "/data/landing/2026"},
		{"s3://lake/prod", "s3://drop/in/*.csv", "s3://lake", "prod/raw/t", "s3://drop", "in"},
		{"s3://lake", "https://user:pw@api.example:8443/export/day.csv?token=s3cr3t#x", "s3://lake", "raw/t", "https://api.example:8443", "/export/day.csv"},
	}
	for _, c := range cases {
		t.Run(c.warehouse+" "+c.source, func(t *testing.T) {
			sp := parse(t, c.warehouse, c.source)
			b, err := NewBuilder(sp, mem.New(mem.Config{}))
			if err != nil {
				t.Fatal(err)
			}
			if ns, name := b.TableDataset("raw.t"); ns != c.tableNS || name != c.tableName {
				t.Errorf("table: %s %s, want %s %s", ns, name, c.tableNS, c.tableName)
			}
			ev := b.StageEvent(context.Background(), Start, RunInfo{ID: "p@20260101T000000Z", Attempt: 1}, StageInfo{Name: "load"}, time.Now())
			if got := ev.Inputs[0]; got.Namespace != c.sourceNS || got.Name != c.sourceName {
				t.Errorf("source: %s %s, want %s %s", got.Namespace, got.Name, c.sourceNS, c.sourceName)
			}
			if got := ev.Outputs[0]; got.Namespace != c.tableNS || got.Name != c.tableName || got.Facets["version"] != nil {
				t.Errorf("output at START: %+v, want the table without a version", got)
			}
		})
	}
}

// Run ids are UUIDs (version 5 layout), the same for the same run, attempt and stage.
func TestRunUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := RunUUID("p@20260101T000000Z", 1, ""), RunUUID("p@20260101T000000Z", 1, "")
	if a != b || !re.MatchString(a) {
		t.Errorf("%s, %s: want one UUID", a, b)
	}
	for _, other := range []string{RunUUID("p@20260101T000000Z", 2, ""), RunUUID("p@20260101T000000Z", 1, "load"), RunUUID("p@20260101T010000Z", 1, "")} {
		if other == a {
			t.Errorf("two runs share %s", a)
		}
	}
}

// A failed delivery's error names the consumer as the pipeline wrote it, never its
// expanded URL or API key; the key goes in the Authorization header.
func TestSendKeepsSecrets(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	l := pipelines.Lineage{URL: srv.URL + "/t0k3n-path", Display: "${OL}", Endpoint: "api/v1/lineage", APIKey: "k3y"}
	c := NewClient(ClientConfig{Retries: 1, MinWait: time.Millisecond, MaxWait: time.Millisecond})
	status, err := c.Send(context.Background(), l, Event{EventType: Start}, false)
	if status != http.StatusBadGateway || err == nil {
		t.Fatalf("status %d, err %v; want 502 and an error", status, err)
	}
	if strings.Contains(err.Error(), "t0k3n") || strings.Contains(err.Error(), "k3y") || !strings.Contains(err.Error(), "${OL}") {
		t.Errorf("error %q: want the consumer as written, no secret", err)
	}
	if auth != "Bearer k3y" {
		t.Errorf("Authorization %q", auth)
	}
	l.URL = "http://127.0.0.1:1/t0k3n-path"
	if _, err := c.Send(context.Background(), l, Event{}, true); err == nil || strings.Contains(err.Error(), "t0k3n") {
		t.Errorf("a closed port: %v", err)
	}
}
