package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// EnvMinIOBin names the MinIO binary; scripts/test.sh exports the one it runs.
const EnvMinIOBin = "ORCH_TEST_MINIO_BIN"

// MinIO is a MinIO server of one test's own, which the test may stop and start again
// (the shared one of scripts/test.sh must never be stopped). It keeps its port and its
// data directory across restarts.
type MinIO struct {
	t         testing.TB
	bin, dir  string
	addr      string // 127.0.0.1:port
	user, key string

	mu     sync.Mutex    // guards cmd and exited
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd has exited
}

// StartMinIO starts a MinIO server on a free loopback port with a temporary data
// directory; it is killed when the test ends. The binary is $ORCH_TEST_MINIO_BIN, else
// minio on PATH, else $(go env GOBIN) or $(go env GOPATH)/bin/minio, as scripts/test.sh
// finds it. Without one the test is skipped, or fails when CI=true.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	bin := findMinIO()
	if bin == "" {
		Unavailable(t, "no MinIO binary (set %s, put minio on PATH, or run bash scripts/test.sh, which installs it)", EnvMinIOBin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	m := &MinIO{t: t, bin: bin, dir: t.TempDir(), addr: addr,
		user: "orch-" + strings.ToLower(rand.Text()[:8]), key: rand.Text()}
	t.Cleanup(m.Stop)
	m.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s3.New(m.Config("orchestrator-test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatalf("own MinIO at %s: %v", addr, err)
	}
	return m
}

func findMinIO() string {
	if bin := os.Getenv(EnvMinIOBin); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("minio"); err == nil {
		return bin
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(string(out), "\n")
	dirs := []string{strings.TrimSpace(lines[0])}
	if len(lines) > 1 {
		gopath, _, _ := strings.Cut(strings.TrimSpace(lines[1]), string(os.PathListSeparator))
		dirs = append(dirs, filepath.Join(gopath, "bin"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "minio")); err == nil && fi.Mode().IsRegular() {
			return filepath.Join(d, "minio")
		}
	}
	return ""
}

// Endpoint is the server's URL, http://127.0.0.1:port.
func (m *MinIO) Endpoint() string { return "http://" + m.addr }

// Config is a store configuration for bucket on this server.
func (m *MinIO) Config(bucket string) s3.Config {
	return s3.Config{Endpoint: m.Endpoint(), AccessKey: m.user, SecretKey: m.key, Region: "us-east-1",
		Bucket: bucket, PathStyle: true}
}

// Start starts the server (again) and waits until it answers its readiness probe.
func (m *MinIO) Start() {
	m.t.Helper()
	if err := m.TryStart(); err != nil {
		m.t.Fatal(err)
	}
}

// TryStart is Start for goroutines other than the test's: it returns the failure.
func (m *MinIO) TryStart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	cmd := exec.Command(m.bin, "server", filepath.Join(m.dir, "data"), "--address", m.addr,
		"--console-address", "127.0.0.1:0", "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.user, "MINIO_ROOT_PASSWORD="+m.key, "MINIO_UPDATE=off")
	logf, err := os.OpenFile(filepath.Join(m.dir, "minio.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr() // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start MinIO %s: %w", m.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(m.Endpoint() + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(m.dir, "minio.log"))
			return fmt.Errorf("MinIO exited before answering on %s:\n%s", m.addr, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("MinIO did not answer on %s within 60s", m.addr)
		}
	}
	m.cmd, m.exited = cmd, exited
	return nil
}

// Stop kills the server, as a crash or an outage would, and waits until it is gone.
func (m *MinIO) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}
