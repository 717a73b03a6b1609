package orchestrator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeMaxBytes keeps the README a page a newcomer reads for the two commands, a tour of
// the example and the links: the reference, guarantees, limits and benchmark figures live
// in docs/ and bench/results/.
const readmeMaxBytes = 20 << 10

// TestReadmeIsShortAndLinksEveryDocsPage: the README stays under its size, and every page
// of docs/ is linked from it (a page nothing links to is a page nobody finds).
func TestReadmeIsShortAndLinksEveryDocsPage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, over %d: move reference material to a page of docs/", len(b), readmeMaxBytes)
	}
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	for _, p := range pages {
		if !strings.Contains(string(b), "]("+p) {
			t.Errorf("README.md does not link %s", p)
		}
	}
}
