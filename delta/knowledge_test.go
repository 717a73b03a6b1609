package delta_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyDeltaSpellsItsKnowledge: no Go file outside package delta (tests and test data
// aside) spells a delta.* property or metadata key or the _delta_log directory; they ask
// package delta (SettableProperties, CheckProperty, ChangeDataFeedOn, SetIdentity,
// IsIdentity, Exists) instead.
func TestOnlyDeltaSpellsItsKnowledge(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
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
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"delta.`) || strings.Contains(line, "_delta_log") {
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("Delta's knowledge spelled outside package delta:\n%s", strings.Join(found, "\n"))
	}
}
