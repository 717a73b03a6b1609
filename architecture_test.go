package orchestrator_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archRow is one package of the README's architecture table and the project packages
// it says that package imports.
type archRow struct {
	line    int
	imports []string
	noGo    bool // "—": a directory that is no Go package (examples)
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readArchitecture parses the table of the README's "## Architecture" section: each row
// names packages (module-relative, in backticks, comma-separated) and, in its last
// column, the project packages they import (in backticks; other text is a comment),
// "none", or "—" for a directory that is no Go package.
func readArchitecture(t *testing.T, file string) map[string]archRow {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]archRow{}
	in, header := false, 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Architecture"
			continue
		case !in || !strings.HasPrefix(line, "|"):
			continue
		case header < 2: // the column names and the separator
			header++
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a row of %d cells, want 3 (package | owns | imports)", file, n, len(cells))
		}
		row := archRow{line: n}
		switch deps := strings.TrimSpace(cells[2]); deps {
		case "none":
		case "—":
			row.noGo = true
		default:
			for _, m := range backticked.FindAllStringSubmatch(deps, -1) {
				row.imports = append(row.imports, m[1])
			}
			if len(row.imports) == 0 {
				t.Fatalf("%s:%d: imports %q: want packages in backticks, none, or —", file, n, deps)
			}
		}
		slices.Sort(row.imports)
		pkgs := backticked.FindAllStringSubmatch(cells[0], -1)
		if len(pkgs) == 0 {
			t.Fatalf("%s:%d: no package in backticks in %q", file, n, cells[0])
		}
		for _, m := range pkgs {
			if prev, dup := rows[m[1]]; dup {
				t.Fatalf("%s:%d: package %s again (first on line %d)", file, n, m[1], prev.line)
			}
			rows[m[1]] = row
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 10 {
		t.Fatalf("%s: only %d packages in the architecture table", file, len(rows))
	}
	return rows
}

// goList returns the module's packages that have Go files (module-relative paths) and
// the project packages each imports, from go list.
func goList(t *testing.T) map[string][]string {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{len .GoFiles}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list ./...: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list ./...: %v", err)
	}
	pkgs := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] == "0" { // a directory of tests only
			continue
		}
		var deps []string
		for _, imp := range f[2:] {
			if rel, ok := strings.CutPrefix(imp, prefix); ok {
				deps = append(deps, rel)
			}
		}
		slices.Sort(deps)
		pkgs[strings.TrimPrefix(f[0], prefix)] = deps
	}
	return pkgs
}

// missingFrom returns the elements of a that b lacks.
func missingFrom(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestArchitectureTableIsTheImports: the README's architecture table lists every package
// of the module, and for each exactly the project packages it imports (its non-test
// files, as go list reports them).
func TestArchitectureTableIsTheImports(t *testing.T) {
	table := readArchitecture(t, "README.md")
	real := goList(t)
	for pkg, imports := range real {
		row, ok := table[pkg]
		switch {
		case !ok:
			t.Errorf("package %s has no row in the README's architecture table (it imports %s)", pkg, listOrNone(imports))
		case row.noGo:
			t.Errorf("README.md:%d: %s is marked as no Go package, but it is one (it imports %s)", row.line, pkg, listOrNone(imports))
		default:
			if extra := missingFrom(imports, row.imports); len(extra) > 0 {
				t.Errorf("README.md:%d: package %s imports %s, which its row does not list", row.line, pkg, strings.Join(extra, ", "))
			}
			if gone := missingFrom(row.imports, imports); len(gone) > 0 {
				t.Errorf("README.md:%d: package %s does not import %s, which its row lists", row.line, pkg, strings.Join(gone, ", "))
			}
		}
	}
	for pkg, row := range table {
		if _, ok := real[pkg]; ok || row.noGo {
			continue
		}
		t.Errorf("README.md:%d: %s is no package of the module", row.line, pkg)
	}
}

func listOrNone(pkgs []string) string {
	if len(pkgs) == 0 {
		return "no project package"
	}
	return strings.Join(pkgs, ", ")
}
