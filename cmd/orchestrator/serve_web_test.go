package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeNeedsATokenBeyondLoopback: serve refuses another address than loopback
// without a token, at once and saying how to give one; with a token file it serves,
// and its API wants the token.
func TestServeNeedsATokenBeyondLoopback(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"pipes/p.yaml": "pipeline: p\ntables:\n  raw.t:\n    columns: [{name: id, type: string}]\nstages:\n  - {name: v, kind: vacuum, tables: [raw.t]}\n"})
	pipes := filepath.Join(dir, "pipes")
	cmd := exec.Command(bin, "serve", "--pipelines", pipes, "--addr", "0.0.0.0:0")
	cmd.Env = commandEnv([]string{"ORCH_AUTH_TOKEN="})
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "needs a token (--auth-token-file FILE or ORCH_AUTH_TOKEN)") {
		t.Fatalf("serve on 0.0.0.0 without a token: %v\n%s\nwant exit 2 naming the token flag", err, out)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, bin, pipes, []string{"ORCH_AUTH_TOKEN="}, "--auth-token-file", tokenFile)
	url := "http://" + p.addr + "/api/v1/pipelines"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API without the token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("API with the token from the file: %d, want 200", resp.StatusCode)
	}
	p.term(t)
}
