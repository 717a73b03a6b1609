package main

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// runCmd runs a program in dir ("" = the package directory) and returns what it printed
// and its exit code.
func runCmd(t *testing.T, dir, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
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
