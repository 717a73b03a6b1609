package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// These tests run serve through the built binary with real time, kept short: slots
// every 2 s.

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveProc is a running serve.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	addr   string
	pid    int
	done   chan struct{}
	code   int
}

var servingRE = regexp.MustCompile(`serving .* on http://(\S+) \(pid (\d+)\)`)

// startServe starts serve on dir, on a free port, and waits until it listens.
func startServe(t *testing.T, bin, dir string, env []string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--pipelines", dir, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = commandEnv(env)
	p := &serveProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("serve pid %d stderr:\n%s", p.pid, p.stderr)
		}
	})
	waitFor(t, 30*time.Second, "serve to listen", func() bool {
		m := servingRE.FindStringSubmatch(p.stderr.String())
		if m == nil {
			return false
		}
		p.addr, p.pid = m[1], atoi(m[2])
		return true
	})
	return p
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// kill ends the process at once (SIGKILL): nothing of it runs any more.
func (p *serveProc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term asks the process to stop (SIGTERM) and waits for it to exit 0.
func (p *serveProc) term(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s of SIGTERM")
	}
	if p.code != 0 {
		t.Errorf("serve exit %d after SIGTERM, want 0", p.code)
	}
}

func (p *serveProc) health(t *testing.T) health {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitFor polls cond until it holds, or fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gatedSource is an HTTP source whose answers wait while it is held, so a test can
// kill a serve while a stage is reading it. It starts open.
type gatedSource struct {
	srv      *httptest.Server
	mu       sync.Mutex
	open     chan struct{} // closed while answers go out at once
	requests chan struct{} // a token per request that came while held
}

func newGatedSource(t *testing.T, body string) *gatedSource {
	g := &gatedSource{open: make(chan struct{}), requests: make(chan struct{}, 100)}
	close(g.open)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		default:
			select {
			case g.requests <- struct{}{}:
			default:
			}
		}
		select {
		case <-open:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		io.WriteString(w, body)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// hold makes the next requests wait until release.
func (g *gatedSource) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gatedSource) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// warehouseFor is a pipeline's warehouse setting and its store, on local disk or on
// the test MinIO, with the environment the binary needs for it.
type warehouseFor struct {
	yaml  string // the warehouse and storage keys
	env   []string
	store objectstore.Store
}

func localWarehouse(t *testing.T, dir string) warehouseFor {
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return warehouseFor{yaml: "warehouse: " + dir, store: st}
}

func minioWarehouse(t *testing.T) warehouseFor {
	cfg := testenv.S3Config(t)
	cfg.Prefix = testenv.S3Prefix(t)
	cleanS3(t, cfg)
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return warehouseFor{
		yaml: fmt.Sprintf("warehouse: s3://%s/%s\nstorage: {endpoint: %q, path_style: true}", cfg.Bucket, cfg.Prefix, cfg.Endpoint),
		env: []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey, "AWS_REGION=us-east-1",
			"AWS_SESSION_TOKEN=", "AWS_ENDPOINT_URL_S3=", "AWS_ENDPOINT_URL="},
		store: st,
	}
}

// runsOf lists every run of a pipeline in a run store, oldest first.
func runsOf(t *testing.T, st *scheduler.Store, pipeline string) []*scheduler.Record {
	t.Helper()
	entries, err := st.List(context.Background(), pipeline, 100000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*scheduler.Record
	for i := len(entries) - 1; i >= 0; i-- {
		r, err := st.Get(context.Background(), entries[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// tableIDs reads a table's id column through the binary, one id per line, sorted.
func tableIDs(t *testing.T, bin, pipeline, table string, env []string) string {
	t.Helper()
	r := runCmdEnv(t, "", env, bin, "table", "show", table, "--pipeline", pipeline, "--columns", "id", "--format", "csv")
	if r.code != 0 {
		t.Fatalf("table show %s: exit %d\n%s", table, r.code, r.stderr)
	}
	return sortedLines(r.stdout)
}

// lines reads a text's lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(s)))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
