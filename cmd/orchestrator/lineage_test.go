package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/lineage"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// lineageServer is an OpenLineage consumer on loopback that records what it is sent.
type lineageServer struct {
	mu     sync.Mutex
	events []map[string]any
	raw    []string
	auth   []string
	fail   bool
	srv    *httptest.Server
}

func newLineageServer(t *testing.T) *lineageServer {
	ls := &lineageServer{}
	ls.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if r.URL.Path != "/api/v1/lineage" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("an event posted to %s as %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("an event that is not JSON: %s", b)
		}
		ls.events = append(ls.events, ev)
		ls.raw = append(ls.raw, string(b))
		ls.auth = append(ls.auth, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(ls.srv.Close)
	return ls
}

// get walks a decoded JSON value by keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestLineageEventsOfTheSalesExample runs the sales example with OPENLINEAGE_URL set to
// a consumer on loopback: every run and stage sends START then COMPLETE, stages name
// their run as parent, datasets are named as OpenLineage's naming spec says for local
// files, each table's version facet is the Delta version the stage read or wrote (the
// table's own history says so), with its schema, column lineage and output statistics;
// the API key goes in the Authorization header only. A consumer that fails leaves the
// run succeeded, with the failed deliveries in its record.
func TestLineageEventsOfTheSalesExample(t *testing.T) {
	unsetEnv(t, "ORCH_WAREHOUSE")
	ls := newLineageServer(t)
	t.Setenv("OPENLINEAGE_URL", ls.srv.URL)
	t.Setenv("OPENLINEAGE_NAMESPACE", "sales-team")
	t.Setenv("OPENLINEAGE_API_KEY", "k3y-s3cr3t")
	pipeline := copyExample(t)
	dir := filepath.Dir(pipeline)
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	ls.mu.Lock()
	events, raws, auths := ls.events, ls.raw, ls.auth
	ls.mu.Unlock()
	if len(events) != 12 {
		t.Fatalf("%d events, want 12 (START and COMPLETE of the run and its 5 stages)", len(events))
	}
	for i, raw := range raws {
		if strings.Contains(raw, "k3y-s3cr3t") || strings.Contains(raw, ls.srv.URL) {
			t.Errorf("event %d holds the API key or the consumer's URL: %s", i, raw)
		}
		if auths[i] != "Bearer k3y-s3cr3t" {
			t.Errorf("event %d Authorization %q", i, auths[i])
		}
	}
	first, last := events[0], events[len(events)-1]
	if get(first, "eventType") != "START" || get(first, "job", "name") != "sales" || get(last, "eventType") != "COMPLETE" || get(last, "job", "name") != "sales" {
		t.Fatalf("first %v %v, last %v %v: want the run's START first and its COMPLETE last", get(first, "eventType"), get(first, "job", "name"), get(last, "eventType"), get(last, "job", "name"))
	}
	parent, _ := get(first, "run", "runId").(string)
	whDir, _ := filepath.Abs(filepath.Join(dir, "warehouse"))
	st, err := fs.New(fs.Config{Dir: whDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	latest := func(path string) int64 {
		tbl, err := delta.Open(context.Background(), st, path, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := tbl.Snapshot(context.Background())
		return s.Version()
	}
	byJob := map[string]map[string]any{} // job → its COMPLETE
	started := map[string]bool{}
	for _, ev := range events {
		for _, k := range []string{"eventTime", "producer", "schemaURL", "run", "job"} {
			if get(ev, k) == nil {
				t.Errorf("an event without %s: %v", k, ev)
			}
		}
		if get(ev, "schemaURL") != lineage.RunEventSchemaURL {
			t.Errorf("schemaURL %v", get(ev, "schemaURL"))
		}
		if _, err := time.Parse(time.RFC3339, get(ev, "eventTime").(string)); err != nil {
			t.Errorf("eventTime: %v", err)
		}
		if id, _ := get(ev, "run", "runId").(string); !uuidRE.MatchString(id) {
			t.Errorf("runId %q is not a UUID", id)
		}
		if get(ev, "job", "namespace") != "sales-team" {
			t.Errorf("job namespace %v", get(ev, "job", "namespace"))
		}
		job := get(ev, "job", "name").(string)
		switch get(ev, "eventType") {
		case "START":
			started[job] = true
		case "COMPLETE":
			if !started[job] {
				t.Errorf("%s COMPLETE before its START", job)
			}
			byJob[job] = ev
		}
		if job != "sales" && get(ev, "run", "facets", "parent", "run", "runId") != parent {
			t.Errorf("%s: parent %v, want the run's %s", job, get(ev, "run", "facets", "parent"), parent)
		}
	}
	ingest := byJob["sales.ingest_sales"]
	if ingest == nil {
		t.Fatal("no COMPLETE of sales.ingest_sales")
	}
	bronze := filepath.ToSlash(filepath.Join(whDir, "bronze", "sales_transactions"))
	out := get(ingest, "outputs", 0)
	if get(out, "namespace") != "file" || get(out, "name") != bronze {
		t.Errorf("ingest output %v %v, want file %s", get(out, "namespace"), get(out, "name"), bronze)
	}
	v := latest("bronze/sales_transactions")
	if got := get(out, "facets", "version", "datasetVersion"); got != jsonInt(v) {
		t.Errorf("ingest output version %v, want the table's v%d", got, v)
	}
	if in := get(ingest, "inputs", 0); get(in, "namespace") != "file" || get(in, "name") != filepath.ToSlash(filepath.Join(dir, "landing", "sales")) {
		t.Errorf("ingest input %v %v, want the landing directory", get(in, "namespace"), get(in, "name"))
	}
	if f := get(out, "facets", "columnLineage", "fields", "amount", "inputFields", 0); get(f, "field") != "amount" || get(f, "name") != filepath.ToSlash(filepath.Join(dir, "landing", "sales")) {
		t.Errorf("amount's column lineage %v, want the source's amount", f)
	}
	if get(out, "facets", "columnLineage", "fields", "source_file") != nil {
		t.Error("source_file has column lineage; it is no source column")
	}
	if fields, _ := get(out, "facets", "schema", "fields").([]any); len(fields) != 8 || get(fields[4], "type") != "decimal(10,2)" {
		t.Errorf("schema facet %v", fields)
	}
	// The expectations' results: one assertion each, in the input facet the spec
	// defines, on the table they judged (an input too: the checks read it), at the
	// version the stage wrote.
	wantAssertions := `[{"assertion":"typical_amount","column":"amount","severity":"warn","success":false},` +
		`{"assertion":"positive_quantity","column":"quantity","severity":"warn","success":true},` +
		`{"assertion":"one_row_per_transaction","column":"transaction_id","severity":"error","success":true}]`
	judged := get(ingest, "inputs", 1)
	if get(judged, "namespace") != "file" || get(judged, "name") != bronze || get(judged, "facets", "version", "datasetVersion") != jsonInt(v) {
		t.Errorf("ingest's second input %v %v version %v, want the table its checks judged, %s v%d", get(judged, "namespace"), get(judged, "name"), get(judged, "facets", "version", "datasetVersion"), bronze, v)
	}
	if got := string(must(json.Marshal(get(judged, "inputFacets", "dataQualityAssertions", "assertions")))); got != wantAssertions {
		t.Errorf("ingest's judged input's dataQualityAssertions %s, want %s", got, wantAssertions)
	}
	if got := get(judged, "inputFacets", "dataQualityAssertions", "_schemaURL"); got != "https://openlineage.io/spec/facets/1-1-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet" {
		t.Errorf("dataQualityAssertions _schemaURL %v", got)
	}
	for i := range 2 {
		if got := get(ingest, "outputs", i, "facets", "dataQualityAssertions"); got != nil {
			t.Errorf("output %d carries assertions %v; the spec's facet is an input facet", i, got)
		}
	}
	if n := len(get(ingest, "inputs").([]any)); n != 2 {
		t.Errorf("ingest has %d inputs, want the landing directory and the judged table", n)
	}
	rec := readRecord(t, whDir, lastRunID(t, pipeline))
	var rows, size int64
	for _, tv := range rec.Stage("ingest_sales").VersionsWritten {
		if tv.Table != "bronze.sales_transactions" {
			continue // the quarantine table's commits
		}
		cs, err := delta.CommitOutput(context.Background(), st, "bronze/sales_transactions", tv.Version)
		if err != nil {
			t.Fatal(err)
		}
		rows, size = rows+cs.Rows, size+cs.Bytes
	}
	if got := get(out, "outputFacets", "outputStatistics", "rowCount"); got != float64(rows) || rows == 0 {
		t.Errorf("ingest rowCount %v, want the %d rows its commits added", got, rows)
	}
	if got := get(out, "outputFacets", "outputStatistics", "size"); got != float64(size) || size == 0 {
		t.Errorf("ingest size %v, want the %d bytes its commits added", got, size)
	}
	capture := byJob["sales.capture_sales_history"]
	if in := get(capture, "inputs", 0); get(in, "name") != bronze || get(in, "facets", "version", "datasetVersion") != jsonInt(v) {
		t.Errorf("capture input %v v%v, want bronze at v%d", get(in, "name"), get(in, "facets", "version", "datasetVersion"), v)
	}
	if got, want := get(capture, "outputs", 0, "facets", "version", "datasetVersion"), jsonInt(latest("audit/sales_transactions_history")); got != want {
		t.Errorf("capture output version %v, want %v", got, want)
	}
	merge := byJob["sales.merge_customers"]
	if got, want := get(merge, "outputs", 0, "facets", "version", "datasetVersion"), jsonInt(latest("sales/customer")); got != want {
		t.Errorf("merge output version %v, want %v", got, want)
	}
	if f := get(merge, "outputs", 0, "facets", "columnLineage", "fields", "valid_from", "inputFields", 0); get(f, "field") != "updated_at" {
		t.Errorf("valid_from's column lineage %v, want updated_at", f)
	}

	// The record says what was delivered, without the key.
	if rec.Lineage == nil || rec.Lineage.Sent != 12 || rec.Lineage.Failed != 0 || rec.Lineage.URL != "$OPENLINEAGE_URL" {
		t.Errorf("record lineage %+v, want 12 sent", rec.Lineage)
	}

	// A consumer that fails: the run succeeds; the record counts the failures.
	ls.mu.Lock()
	ls.fail = true
	ls.mu.Unlock()
	os.WriteFile(filepath.Join(dir, "landing", "sales", "zz.csv"), []byte("transaction_id,customer_id,product,quantity,amount,sold_at\nT-9,C-1,mug,1,3.00,2026-01-20T10:00:00Z\n"), 0o644)
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("a run with a failing consumer: exit %d\n%s", r.code, r.stderr)
	}
	rec = readRecord(t, whDir, lastRunID(t, pipeline))
	if rec.Status != scheduler.Succeeded || rec.Lineage == nil || rec.Lineage.Failed != 12 || rec.Lineage.Sent != 0 || !strings.Contains(rec.Lineage.Events[0].Error, "500") {
		t.Errorf("run with a failing consumer: %s, lineage %+v", rec.Status, rec.Lineage)
	}
	b, _ := json.Marshal(rec)
	if strings.Contains(string(b), "k3y-s3cr3t") {
		t.Error("the API key is in the record")
	}
}

// lastRunID is the id of the pipeline's newest run (runs list, newest first).
func lastRunID(t *testing.T, pipeline string) string {
	t.Helper()
	r := runCLI(t, "runs", "list", "--pipeline", pipeline, "--format", "json")
	first, _, _ := strings.Cut(strings.TrimSpace(r.stdout), "\n")
	var e struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal([]byte(first), &e); err != nil || e.Run == "" {
		t.Fatalf("runs list: %v %s", err, r.stdout)
	}
	return e.Run
}

func jsonInt(v int64) string { return strings.TrimSpace(string(must(json.Marshal(v)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// readRecord reads a run's record from the warehouse's run store.
func readRecord(t *testing.T, whDir, id string) *scheduler.Record {
	t.Helper()
	st, err := fs.New(fs.Config{Dir: whDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := scheduler.NewStore(st).Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
