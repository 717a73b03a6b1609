package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// runCmd runs a program in dir ("" = the package directory) and returns what it printed
// and its exit code.
func runCmd(t *testing.T, dir, name string, args ...string) result {
	t.Helper()
	return runCmdEnv(t, dir, nil, name, args...)
}

// runCmdEnv is runCmd with extra environment variables ("NAME=value"; "NAME=" with an
// empty value unsets NAME for the program).
func runCmdEnv(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = commandEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", name, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// commandEnv is this process's environment with extra settings applied.
func commandEnv(extra []string) []string {
	set := map[string]string{}
	var order []string
	for _, kv := range append(os.Environ(), extra...) {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	var out []string
	for _, k := range order {
		if set[k] != "" {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string // removed by TestMain
)

// testVersion is the version the test binary is linked with (-ldflags -X main.version).
const testVersion = "v9.9.9-test"

// buildBinary builds the orchestrator binary once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		testenv.Unavailable(t, "builds the binary, which -short leaves out")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "orchestrator-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "orchestrator")
		out, err := exec.Command("go", "build", "-o", binPath, "-ldflags", "-X main.version="+testVersion, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	testenv.StopSpark()
	os.Exit(code)
}
