package dag

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var noop = TaskFunc(func(context.Context, int) error { return nil })

// node declares a no-op node named name that depends on deps.
func node(name string, deps ...string) Node {
	return Node{Name: name, Task: noop, DependsOn: deps}
}

func TestNewReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  string   // the whole error message
		kinds []error  // each must be found by errors.Is
		cycle []string // the path of the first cycle problem, if any
	}{
		{
			name:  "cycle of three names its path",
			nodes: []Node{node("a", "c"), node("b", "a"), node("c", "b")},
			want:  "invalid graph: dependency cycle: a -> c -> b -> a",
			kinds: []error{ErrCycle},
			cycle: []string{"a", "c", "b", "a"},
		},
		{
			name:  "cycle starts at the earliest declared node",
			nodes: []Node{node("start", "x"), node("x", "y"), node("y", "z"), node("z", "x")},
			want:  "invalid graph: dependency cycle: x -> y -> z -> x",
			kinds: []error{ErrCycle},
			cycle: []string{"x", "y", "z", "x"},
		},
		{
			name:  "self dependency",
			nodes: []Node{node("a", "a")},
			want:  "invalid graph: dependency cycle: a -> a",
			kinds: []error{ErrCycle},
			cycle: []string{"a", "a"},
		},
		{
			name:  "two separate cycles",
			nodes: []Node{node("a", "b"), node("b", "a"), node("ok"), node("c", "d", "ok"), node("d", "c")},
			want: "invalid graph: 2 problems:\n" +
				"\tdependency cycle: a -> b -> a\n" +
				"\tdependency cycle: c -> d -> c",
			kinds: []error{ErrCycle},
			cycle: []string{"a", "b", "a"},
		},
		{
			name:  "unknown dependencies",
			nodes: []Node{node("a", "nope"), node("b", "a", "missing")},
			want: "invalid graph: 2 problems:\n" +
				"\tnode \"a\": depends on unknown node \"nope\"\n" +
				"\tnode \"b\": depends on unknown node \"missing\"",
			kinds: []error{ErrUnknownDependency},
		},
		{
			name:  "duplicate names",
			nodes: []Node{node("a"), node("b"), node("a"), node("b")},
			want: "invalid graph: 2 problems:\n" +
				"\tnode \"a\": duplicate name, first declared as node 0\n" +
				"\tnode \"b\": duplicate name, first declared as node 1",
			kinds: []error{ErrDuplicateName},
		},
		{
			name:  "empty name, nil task, repeated dependency",
			nodes: []Node{{Task: noop}, {Name: "b"}, node("c", "b", "b")},
			want: "invalid graph: 3 problems:\n" +
				"\tnode 0: empty name\n" +
				"\tnode \"b\": no task\n" +
				"\tnode \"c\": depends on \"b\" more than once",
			kinds: []error{ErrEmptyName, ErrNilTask, ErrDuplicateDependency},
		},
		{
			name: "policy out of range",
			nodes: []Node{{Name: "a", Task: noop, Retries: -1, Timeout: -time.Second,
				Backoff: Backoff{Initial: -1, Max: -1, Multiplier: 0.5, Jitter: 9}}},
			want: "invalid graph: 6 problems:\n" +
				"\tnode \"a\": retries must not be negative, got -1\n" +
				"\tnode \"a\": timeout must not be negative, got -1s\n" +
				"\tnode \"a\": backoff initial delay must not be negative, got -1ns\n" +
				"\tnode \"a\": backoff max delay must not be negative, got -1ns\n" +
				"\tnode \"a\": backoff multiplier must be at least 1, got 0.5\n" +
				"\tnode \"a\": unknown backoff jitter 9",
			kinds: []error{ErrInvalidPolicy},
		},
		{
			name: "all problems at once, by node then cycles",
			nodes: []Node{
				node("load", "extract"),
				node("extract", "load"),
				node("load"),
				node("report", "load", "ghost"),
				{Name: "", Task: noop},
			},
			want: "invalid graph: 4 problems:\n" +
				"\tnode \"load\": duplicate name, first declared as node 0\n" +
				"\tnode \"report\": depends on unknown node \"ghost\"\n" +
				"\tnode 4: empty name\n" +
				"\tdependency cycle: load -> extract -> load",
			kinds: []error{ErrDuplicateName, ErrUnknownDependency, ErrEmptyName, ErrCycle},
			cycle: []string{"load", "extract", "load"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.nodes)
			if err == nil {
				t.Fatalf("New() = %v, nil; want error %q", g.Names(), tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("New() error:\n%s\nwant:\n%s", got, tt.want)
			}
			for _, k := range tt.kinds {
				if !errors.Is(err, k) {
					t.Errorf("errors.Is(err, %v) = false, want true", k)
				}
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error is %T, want *ValidationError", err)
			}
			if tt.cycle != nil {
				i := slices.IndexFunc(ve.Problems, func(p Problem) bool { return p.Kind == ErrCycle })
				if got := ve.Problems[i].Cycle; !slices.Equal(got, tt.cycle) {
					t.Errorf("Problem.Cycle = %q, want %q", got, tt.cycle)
				}
			}
			// The same input gives the same message every time.
			for range 20 {
				if _, again := New(tt.nodes); again.Error() != err.Error() {
					t.Fatalf("second New() error:\n%s\nfirst:\n%s", again, err)
				}
			}
		})
	}
}

func TestProblemPointsAtTheNode(t *testing.T) {
	_, err := New([]Node{node("a"), node("b", "a", "zzz")})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("New() error = %v, want one problem", err)
	}
	got := ve.Problems[0]
	want := Problem{Kind: ErrUnknownDependency, Index: 1, Node: "b", Dep: "zzz"}
	if got.Kind != want.Kind || got.Index != want.Index || got.Node != want.Node || got.Dep != want.Dep {
		t.Errorf("problem = %+v, want %+v", got, want)
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  []string
	}{
		{"empty", nil, []string{}},
		{"independent nodes keep declaration order", []Node{node("c"), node("a"), node("b")}, []string{"c", "a", "b"}},
		{"dependency declared after its dependent", []Node{node("load", "extract"), node("extract")}, []string{"extract", "load"}},
		{
			"diamond",
			[]Node{node("d", "b", "c"), node("c", "a"), node("b", "a"), node("a")},
			[]string{"a", "c", "b", "d"},
		},
		{
			// x becomes ready only after a; z was ready from the start but is declared
			// after y, which becomes ready when a is done, so y comes before z.
			"ties broken by declaration position among ready nodes",
			[]Node{node("a"), node("y", "a"), node("z"), node("x", "y")},
			[]string{"a", "y", "z", "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.nodes)
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if got := g.Order(); !slices.Equal(got, tt.want) {
				t.Errorf("Order() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGraphIsACopy(t *testing.T) {
	nodes := []Node{node("a"), node("b", "a")}
	g, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	nodes[1].DependsOn[0] = "changed"
	nodes[0].Name = "changed"
	n, ok := g.Node("b")
	if !ok || !slices.Equal(n.DependsOn, []string{"a"}) {
		t.Errorf("Node(b) = %+v, %v after the caller changed its slice; want DependsOn [a]", n, ok)
	}
	n.DependsOn[0] = "changed again"
	if again, _ := g.Node("b"); again.DependsOn[0] != "a" {
		t.Errorf("Node(b).DependsOn = %q after changing a returned copy, want [a]", again.DependsOn)
	}
	if got := g.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %q, want [a b]", got)
	}
}

// pipeline is extract → clean → {report, audit}; archive is independent.
func pipeline(t *testing.T) *Graph {
	t.Helper()
	g, err := New([]Node{
		node("extract"),
		node("clean", "extract"),
		node("report", "clean"),
		node("audit", "clean"),
		node("archive"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSubgraph(t *testing.T) {
	g := pipeline(t)
	tests := []struct {
		name      string
		selected  []string
		wantNames []string
		wantDeps  map[string][]string
	}{
		{"one node keeps no upstream", []string{"report"}, []string{"report"}, map[string][]string{"report": nil}},
		{
			"edges inside the selection stay, in declaration order",
			[]string{"audit", "clean", "extract", "audit"},
			[]string{"extract", "clean", "audit"},
			map[string][]string{"extract": nil, "clean": {"extract"}, "audit": {"clean"}},
		},
		{"none", nil, []string{}, map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := g.Subgraph(tt.selected...)
			if err != nil {
				t.Fatalf("Subgraph(%q) error = %v", tt.selected, err)
			}
			if got := sub.Names(); !slices.Equal(got, tt.wantNames) {
				t.Errorf("Subgraph(%q).Names() = %q, want %q", tt.selected, got, tt.wantNames)
			}
			for name, want := range tt.wantDeps {
				n, _ := sub.Node(name)
				if !slices.Equal(n.DependsOn, want) {
					t.Errorf("node %s DependsOn = %q, want %q", name, n.DependsOn, want)
				}
			}
		})
	}
	if n, _ := g.Node("report"); !slices.Equal(n.DependsOn, []string{"clean"}) {
		t.Errorf("original graph changed: report DependsOn = %q, want [clean]", n.DependsOn)
	}
}

func TestSubgraphUnknownNames(t *testing.T) {
	_, err := pipeline(t).Subgraph("report", "nope", "gone")
	if want := `unknown node "nope", "gone"`; err == nil || err.Error() != want {
		t.Errorf("Subgraph error = %v, want %q", err, want)
	}
}

func TestUpstreamDownstream(t *testing.T) {
	g := pipeline(t)
	tests := []struct {
		name string
		fn   func(...string) ([]string, error)
		in   []string
		want []string
	}{
		{"upstream of report", g.Upstream, []string{"report"}, []string{"extract", "clean", "report"}},
		{"upstream of a root", g.Upstream, []string{"archive"}, []string{"archive"}},
		{"downstream of clean", g.Downstream, []string{"clean"}, []string{"clean", "report", "audit"}},
		{"downstream of two", g.Downstream, []string{"archive", "audit"}, []string{"audit", "archive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(tt.in...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := g.Upstream("x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("Upstream(x) error = %v, want one naming \"x\"", err)
	}
}
