package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvSparkRemote names the variable scripts/test.sh exports once it has started the test
// Spark cluster: the Connect server's address, sc://127.0.0.1:PORT.
const EnvSparkRemote = "ORCH_TEST_SPARK_REMOTE"

// sparkCluster is the cluster this test binary started itself, when scripts/test.sh
// gave none (go test run by hand). It is started once and stopped by StopSpark.
var sparkCluster struct {
	once   sync.Once
	cmd    *exec.Cmd
	exited chan error // receives cmd.Wait's result
	dir    string
	remote string
	err    error
}

// SparkRemote returns the address of a Spark Connect server with Delta for the test:
// the one scripts/test.sh started ($ORCH_TEST_SPARK_REMOTE: one standalone master, a
// worker with one core and a Connect server, for the whole run), else one this test
// binary starts once with scripts/spark-cluster.sh from the interop virtualenv's
// pyspark (about 20 s; call StopSpark from TestMain). Without either, the test is
// skipped, or fails when CI=true.
func SparkRemote(t testing.TB) string {
	t.Helper()
	if r := os.Getenv(EnvSparkRemote); r != "" {
		return r
	}
	c := &sparkCluster
	c.once.Do(func() { c.remote, c.err = startSpark() })
	if c.err != nil {
		Unavailable(t, "no Spark: %v (scripts/test.sh starts one and exports %s)", c.err, EnvSparkRemote)
	}
	return c.remote
}

// StopSpark stops the cluster SparkRemote started in this binary, if any.
func StopSpark() {
	c := &sparkCluster
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	_ = os.RemoveAll(c.dir)
	c.cmd = nil
}

// sparkStartTimeout bounds a cluster start (the first one on a machine downloads Delta's
// jars into the Ivy cache).
const sparkStartTimeout = 5 * time.Minute

func startSpark() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "spark-cluster.sh")
	dir, err := os.MkdirTemp("", "orch-spark-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", script, dir)
	logf, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr() // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", script, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(sparkStartTimeout)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "remote")); err == nil {
			sparkCluster.cmd, sparkCluster.exited, sparkCluster.dir = cmd, exited, dir
			return strings.TrimSpace(string(b)), nil
		}
		select {
		case <-exited:
			why, _ := os.ReadFile(filepath.Join(dir, "failed"))
			return "", fmt.Errorf("scripts/spark-cluster.sh failed: %s", strings.TrimSpace(string(why)))
		case <-deadline:
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("scripts/spark-cluster.sh: no Connect server within %s (logs in %s)", sparkStartTimeout, dir)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
