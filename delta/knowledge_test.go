package delta_test

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// deltaKey matches a Delta property or field metadata key ("delta.enableChangeDataFeed",
// "delta.identity.start"): "delta." and a lower-case letter. Go names of package delta
// ("delta.Table") start with an upper-case one.
var deltaKey = regexp.MustCompile(`(^|[^A-Za-z0-9_])delta\.[a-z]`)

// spelledKnowledge lists where the Go source src (named name) spells Delta's knowledge:
// a string literal, interpreted or raw, holding a Delta key or "_delta_log", or a comment
// naming "_delta_log". Comments may name a property (what a user sets is documented
// where it matters); code must ask package delta for it.
func spelledKnowledge(name string, src []byte) []string {
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var found []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return found
		}
		switch tok {
		case token.STRING:
			v, err := strconv.Unquote(lit)
			if err != nil {
				v = lit
			}
			if deltaKey.MatchString(v) || strings.Contains(v, "_delta_log") {
				found = append(found, fmt.Sprintf("%s: %s", fset.Position(pos), lit))
			}
		case token.COMMENT:
			if strings.Contains(lit, "_delta_log") {
				found = append(found, fmt.Sprintf("%s: %s", fset.Position(pos), lit))
			}
		}
	}
}

// TestSpelledKnowledgeRule: what the rule flags and what it lets through.
func TestSpelledKnowledgeRule(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
	}{
		{`x := "delta.appendOnly"`, true},
		{"x := `delta.enableChangeDataFeed: true`", true},
		{`x := "set delta.identity.start first"`, true},
		{`x := "_delta_log/"`, true},
		{`// the log lives in _delta_log`, true},
		{`x := delta.PropAppendOnly + "=true"`, false},
		{`x := "see delta.Table.Append"`, false},
		{`// Retain overrides delta.deletedFileRetentionDuration`, false},
		{`x := "bench/mydelta.csv"`, false},
	} {
		got := len(spelledKnowledge("case.go", []byte("package p\n"+c.src+"\n"))) > 0
		if got != c.want {
			t.Errorf("%s: flagged %v, want %v", c.src, got, c.want)
		}
	}
}

// TestOnlyDeltaSpellsItsKnowledge: no Go file of the module outside package delta
// (testdata aside) spells a Delta property or metadata key or the _delta_log directory
// in its code (spelledKnowledge); it asks package delta (the Prop* and Identity*
// constants, SettableProperties, CheckProperty, ChangeDataFeedOn, SetIdentity,
// IsIdentity, Exists) instead.
//
// Tests (_test.go files) are not held to it: they check what lands in storage and what a
// user types (a commit file's key, a property in a pipeline file), and must spell those
// themselves, since a test that asked delta for "_delta_log" would pass whatever delta
// wrote.
func TestOnlyDeltaSpellsItsKnowledge(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "delta" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		found = append(found, spelledKnowledge(rel, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files found under %s", files, root)
	}
	if len(found) > 0 {
		slices.Sort(found)
		t.Errorf("Delta's knowledge spelled outside package delta:\n%s", strings.Join(found, "\n"))
	}
}
