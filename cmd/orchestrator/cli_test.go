package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// result is what a user sees of one invocation.
type result struct {
	stdout, stderr string
	code           int
}

// testNow is the clock of in-process runs: commits made by commands get this timestamp,
// and retention is counted back from it.
var testNow = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)

// runCLI runs the program in-process as main would, with args after "orchestrator", with
// the clock at testNow.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, lookupEnv: os.LookupEnv, now: func() time.Time { return testNow }}
	err := runEnv(context.Background(), e, args)
	code := exitCode(err, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// transcript renders an invocation the way the golden files hold it.
func (r result) transcript(args []string) string {
	var b strings.Builder
	line := "$ orchestrator"
	for _, a := range args {
		line += " " + shellQuote(a)
	}
	fmt.Fprintf(&b, "%s\nexit %d\n", line, r.code)
	if r.stdout != "" {
		fmt.Fprintf(&b, "-- stdout --\n%s", r.stdout)
	}
	if r.stderr != "" {
		fmt.Fprintf(&b, "-- stderr --\n%s", r.stderr)
	}
	return b.String()
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_./=:,@%+$-]+$`)

// shellQuote writes an argument as a shell would need it.
func shellQuote(s string) string {
	switch {
	case plainArg.MatchString(s):
		return s
	case !strings.Contains(s, "'"):
		return "'" + s + "'"
	case !strings.ContainsAny(s, "\"$`\\"):
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkGolden compares got with testdata/<name>.golden, rewriting it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (go test ./cmd/orchestrator -update creates it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// cliCase is one invocation checked against a golden transcript.
type cliCase struct {
	name     string
	args     []string
	wantCode int
}

func runCases(t *testing.T, cases []cliCase, scrub func(string) string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.wantCode, r.stdout, r.stderr)
			}
			got := r.transcript(tc.args)
			if scrub != nil {
				got = scrub(got)
			}
			checkGolden(t, tc.name, got)
		})
	}
}

func TestValidate(t *testing.T) {
	runCases(t, []cliCase{
		{"validate_ok", []string{"validate", "testdata/pipelines/valid.yaml"}, 0},
		{"validate_invalid", []string{"validate", "testdata/pipelines/invalid.yaml"}, 1},
		{"validate_mixed", []string{"validate", "testdata/pipelines/valid.yaml", "testdata/pipelines/invalid.yaml", "testdata/pipelines/missing.yaml"}, 1},
		{"validate_example", []string{"validate", "../../examples/pipelines/sales/pipeline.yaml"}, 0},
	}, nil)
}

func TestUsage(t *testing.T) {
	runCases(t, []cliCase{
		{"usage_no_command", nil, 2},
		{"usage_unknown_command", []string{"frobnicate"}, 2},
		{"usage_help", []string{"--help"}, 0},
		{"usage_help_command", []string{"help", "validate"}, 0},
		{"usage_help_table", []string{"help", "table"}, 0},
		{"usage_table_show_help", []string{"table", "show", "-h"}, 0},
		{"usage_table_unknown", []string{"table", "describe", "x"}, 2},
		{"usage_validate_no_file", []string{"validate"}, 2},
		{"usage_validate_unknown_flag", []string{"validate", "--strict", "x.yaml"}, 2},
		{"usage_version_argument", []string{"version", "extra"}, 2},
	}, nil)
}

func TestVersion(t *testing.T) {
	r := runCLI(t, "version")
	want := fmt.Sprintf("orchestrator dev (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", r.code, r.stdout, r.stderr, want)
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args      []string
		wantPos   []string
		wantLimit int
	}{
		{[]string{"a", "--limit", "3", "b"}, []string{"a", "b"}, 3},
		{[]string{"--limit=2", "a"}, []string{"a"}, 2},
		{[]string{"a", "--", "--limit", "b"}, []string{"a", "--limit", "b"}, 0},
		{nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			limit := fs.Int("limit", 0, "")
			pos, err := parseInterspersed(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(pos) != fmt.Sprint(tc.wantPos) || *limit != tc.wantLimit {
				t.Errorf("got %q limit %d, want %q limit %d", pos, *limit, tc.wantPos, tc.wantLimit)
			}
		})
	}
}

// TestBinary builds the real binary and runs it, to check what only a process shows:
// the exit code through os.Exit and the version set with -ldflags.
func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}

	r := runCmd(t, repo, bin, "validate", "examples/pipelines/sales/pipeline.yaml")
	if want := "ok: examples/pipelines/sales/pipeline.yaml (pipeline sales, 5 tables, 5 stages)\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("validate example: exit %d, stdout %q, stderr %q; want exit 0 and stdout %q", r.code, r.stdout, r.stderr, want)
	}

	r = runCmd(t, "", bin, "validate", "testdata/pipelines/invalid.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "testdata/pipelines/invalid.yaml:12:11: stage ingest_orders: unknown kind") {
		t.Errorf("validate invalid: exit %d, stderr:\n%s\nwant exit 1 and the problems", r.code, r.stderr)
	}

	r = runCmd(t, "", bin, "table")
	if r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("usage error: exit %d, stderr:\n%s\nwant exit 2 and the usage", r.code, r.stderr)
	}

	r = runCmd(t, "", bin, "version")
	if !regexp.MustCompile(`^orchestrator ` + regexp.QuoteMeta(testVersion) + ` \(go\S+ \S+/\S+\)\n$`).MatchString(r.stdout) {
		t.Errorf("version: stdout %q, want the version set with -ldflags", r.stdout)
	}
}
