package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// secretsPipeline holds every kind of secret a pipeline may use: the S3 keys (from the
// environment), and webhook URLs with a token in the path and in the query, one that
// answers and one that refuses. The second stage fails, so errors are written too.
const secretsPipeline = `pipeline: secretive
schedule: "@every 2s"
%s
notify:
  on_success: ["%s/hook/${HOOK_TOKEN}?key=${HOOK_TOKEN}"]
  on_failure: ["%s/hook/${HOOK_TOKEN}", "http://127.0.0.1:1/closed/${HOOK_TOKEN}"]
tables:
  raw.events:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
    properties: {delta.enableChangeDataFeed: true}
stages:
  - {name: load, kind: ingest, source: %s/*.csv, target: raw.events}
  - {name: broken, kind: ingest, source: %s/missing/*.csv, target: raw.events, depends_on: [load]}
`

// TestSecretsNeverShown runs a pipeline with distinctive secrets on MinIO through run and
// serve, then looks for each secret in everything a user or an attacker could read: every
// command's output, serve's log and HTTP answers, and every object the warehouse holds
// (tables, run records, logs, indexes, leases). None may hold one.
func TestSecretsNeverShown(t *testing.T) {
	bin := buildBinary(t)
	cfg := testenv.S3Config(t)
	dir := t.TempDir()
	wh := minioWarehouse(t)
	const hookToken = "hk-7Q2xZ9sEcReT-41c3"
	var mu sync.Mutex
	var hooks []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, r.URL.String()+" "+string(body))
		mu.Unlock()
	}))
	defer hook.Close()
	landing := filepath.Join(dir, "landing")
	writeFiles(t, dir, map[string]string{
		"pipes/secretive.yaml": fmt.Sprintf(secretsPipeline, wh.yaml, hook.URL, hook.URL, landing, landing),
		"landing/1.csv":        "id\na\nb\n",
	})
	pipeline := filepath.Join(dir, "pipes", "secretive.yaml")
	const authToken = "web-Zk39Qp7TOKEN-8e1d"
	env := append(wh.env, "HOOK_TOKEN="+hookToken, "ORCH_AUTH_TOKEN="+authToken)
	secrets := map[string]string{"S3 access key": cfg.AccessKey, "S3 secret key": cfg.SecretKey, "webhook token": hookToken, "web token": authToken}

	var outputs []string
	cli := func(args ...string) result {
		r := runCmdEnv(t, "", env, bin, args...)
		outputs = append(outputs, strings.Join(args, " ")+"\n"+r.stdout+r.stderr)
		return r
	}
	run := cli("run", pipeline)
	if run.code != 1 || !strings.Contains(run.stdout+run.stderr, "broken") {
		t.Fatalf("run: exit %d, want 1 (the broken stage fails)\n%s%s", run.code, run.stdout, run.stderr)
	}
	id := runID(t, run)

	srv := startServe(t, bin, filepath.Join(dir, "pipes"), env)
	store := scheduler.NewStore(wh.store)
	waitFor(t, 30*time.Second, "a scheduled run to fail and notify", func() bool {
		for _, r := range runsOf(t, store, "secretive") {
			if r.Trigger.Kind == scheduler.Scheduled && r.Status == scheduler.Failed && len(r.Notifications) == 2 {
				return true
			}
		}
		return false
	})
	// Every page and API answer a token holder gets, and what anyone gets.
	for _, path := range []string{
		"/healthz", "/metrics", "/", "/pipelines", "/pipelines/secretive", "/runs/" + id,
		"/tables", "/tables/raw.events", "/tables/raw.events/history", "/tables/raw.events/rows",
		"/tables/raw.events/changes?from=0", "/api/v1/pipelines", "/api/v1/pipelines/secretive",
		"/api/v1/runs?pipeline=secretive", "/api/v1/runs/" + id, "/api/v1/runs/" + id + "/stages/broken/log",
		"/api/v1/tables/raw.events", "/api/v1/tables/raw.events/history", "/api/v1/openapi.json",
	} {
		for _, token := range []string{authToken, ""} {
			req, err := http.NewRequest("GET", "http://"+srv.addr+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if token != "" && resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s with the token: %s\n%s", path, resp.Status, body)
			}
			outputs = append(outputs, fmt.Sprintf("GET %s (token %t)\n%s", path, token != "", body))
		}
	}
	srv.term(t)
	outputs = append(outputs, "serve's log\n"+srv.stderr.String())

	for _, args := range [][]string{
		{"runs", "list", "--pipeline", pipeline},
		{"runs", "list", "--pipeline", pipeline, "--format", "json"},
		{"runs", "show", id, "--pipeline", pipeline},
		{"runs", "show", id, "--pipeline", pipeline, "--format", "json"},
		{"table", "history", "raw.events", "--pipeline", pipeline, "--format", "json"},
		{"table", "changes", "raw.events", "--pipeline", pipeline, "--from", "0", "--format", "json"},
		{"table", "properties", "raw.events", "--pipeline", pipeline},
		{"validate", pipeline, "--check-tables"},
	} {
		if r := cli(args...); r.code != 0 {
			t.Errorf("%s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}

	ctx := context.Background()
	keys, err := wh.store.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var records int
	for _, k := range keys {
		rc, err := wh.store.Get(ctx, k.Key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(k.Key, scheduler.Prefix+"runs/") {
			records++
		}
		outputs = append(outputs, "object "+k.Key+"\n"+string(b))
	}
	if records < 2 {
		t.Fatalf("%d run records in the warehouse, want the CLI's run and serve's", records)
	}

	for what, secret := range secrets {
		for _, out := range outputs {
			if strings.Contains(out, secret) {
				head, _, _ := strings.Cut(out, "\n")
				t.Errorf("the %s appears in %s", what, head)
			}
		}
	}
	// The notifications were sent, to the URLs with their tokens, and their delivery
	// is recorded with the URL as written.
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) < 2 || !strings.Contains(hooks[0], "/hook/"+hookToken) {
		t.Errorf("webhook calls %q, want the token in the path they reached", hooks)
	}
	var failed *scheduler.Record
	for _, r := range runsOf(t, store, "secretive") {
		if r.Trigger.Kind == scheduler.Scheduled && len(r.Notifications) == 2 {
			failed = r
			break
		}
	}
	var deliveries []string
	for _, d := range failed.Notifications {
		deliveries = append(deliveries, fmt.Sprintf("%s %s %d %t", d.Event, d.URL, d.Status, d.Error != ""))
	}
	want := []string{
		fmt.Sprintf("failure %s/hook/${HOOK_TOKEN} 200 false", hook.URL),
		"failure http://127.0.0.1:1/closed/${HOOK_TOKEN} 0 true",
	}
	if strings.Join(deliveries, "\n") != strings.Join(want, "\n") {
		t.Errorf("deliveries of run %s:\n%s\nwant\n%s", failed.ID, strings.Join(deliveries, "\n"), strings.Join(want, "\n"))
	}
}
