package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func TestTextWriterBlocks(t *testing.T) {
	var out bytes.Buffer
	w := newRowWriter(&out, formatText)
	if err := w.header([]column{{name: "n", numeric: true}, {name: "s"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < textBlock+1; i++ {
		v := "a"
		if i == textBlock {
			v = "wider\nvalue" // in the second block; its newline must not break the line
		}
		if err := w.row([]cell{intCell(int64(i)), rowtext.Text(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != textBlock+3 {
		t.Fatalf("got %d lines, want header, dashes and %d rows", len(lines), textBlock+1)
	}
	if lines[0] != "  n  s" || lines[1] != "---  -" || lines[2] != "  0  a" {
		t.Errorf("first block:\n%s\n%s\n%s\nwant the header and rows aligned to the first block", lines[0], lines[1], lines[2])
	}
	if got, want := lines[len(lines)-1], "1000  wider\\nvalue"; got != want {
		t.Errorf("second block row %q, want %q", got, want)
	}
}

func TestEmptyResult(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{formatText, "a  b\n-  -\n"},
		{formatCSV, "a,b\n"},
		{formatJSON, ""},
	} {
		var out bytes.Buffer
		if err := writeRows(&env{stdout: &out}, tc.format, []column{{name: "a"}, {name: "b"}}, nil); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.format, out.String(), tc.want)
		}
	}
}
