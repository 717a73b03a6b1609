package dag

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The kinds of problem New reports. Each Problem unwraps to one of them, so
// errors.Is(err, ErrCycle) tells whether a graph had a cycle.
var (
	ErrEmptyName           = errors.New("empty node name")
	ErrDuplicateName       = errors.New("duplicate node name")
	ErrNilTask             = errors.New("node has no task")
	ErrUnknownDependency   = errors.New("unknown dependency")
	ErrDuplicateDependency = errors.New("duplicate dependency")
	ErrCycle               = errors.New("dependency cycle")
	ErrInvalidPolicy       = errors.New("invalid retry or timeout policy")
)

// ValidationError is every problem New found in a list of nodes. Problems are ordered by
// the declaration position of the node they are about, problems of one node in the order
// of its fields (name, task, dependencies, policy); cycles come last, each starting at the
// earliest-declared node on it.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid graph: " + e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid graph: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is and errors.As see each of them.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// Problem is one thing wrong with a list of nodes. Index and Node say which declared node
// it is about, so a caller can point at its source (a YAML line, say); Dep names the
// dependency involved for ErrUnknownDependency and ErrDuplicateDependency; Cycle is the
// path of an ErrCycle, from the node to its dependency and so on back to the node.
type Problem struct {
	Kind   error // one of the Err* values of this package
	Index  int   // declaration position of the node
	Node   string
	Dep    string
	Cycle  []string
	Detail string // for ErrDuplicateName and ErrInvalidPolicy, what exactly is wrong
}

func (p Problem) Error() string {
	who := fmt.Sprintf("node %q", p.Node)
	if p.Node == "" {
		who = fmt.Sprintf("node %d", p.Index)
	}
	switch p.Kind {
	case ErrEmptyName:
		return who + ": empty name"
	case ErrNilTask:
		return who + ": no task"
	case ErrUnknownDependency:
		return fmt.Sprintf("%s: depends on unknown node %q", who, p.Dep)
	case ErrDuplicateDependency:
		return fmt.Sprintf("%s: depends on %q more than once", who, p.Dep)
	case ErrCycle:
		return "dependency cycle: " + strings.Join(p.Cycle, " -> ")
	}
	return who + ": " + p.Detail
}

func (p Problem) Unwrap() error { return p.Kind }

// validate returns every problem with nodes, in the order ValidationError documents.
func validate(nodes []Node) []Problem {
	first := make(map[string]int, len(nodes)) // name → position of its first declaration
	for i, n := range nodes {
		if _, dup := first[n.Name]; !dup && n.Name != "" {
			first[n.Name] = i
		}
	}
	var problems []Problem
	// edges[i] holds the known, distinct dependencies of the first declaration of a name;
	// later duplicates and nameless nodes take no part in cycle detection.
	edges := make([][]int, len(nodes))
	for i, n := range nodes {
		if n.Name == "" {
			problems = append(problems, Problem{Kind: ErrEmptyName, Index: i})
		} else if j := first[n.Name]; j != i {
			problems = append(problems, Problem{Kind: ErrDuplicateName, Index: i, Node: n.Name,
				Detail: fmt.Sprintf("duplicate name, first declared as node %d", j)})
		}
		if n.Task == nil {
			problems = append(problems, Problem{Kind: ErrNilTask, Index: i, Node: n.Name})
		}
		seen := make(map[string]bool, len(n.DependsOn))
		for _, d := range n.DependsOn {
			j, known := first[d]
			switch {
			case seen[d]:
				problems = append(problems, Problem{Kind: ErrDuplicateDependency, Index: i, Node: n.Name, Dep: d})
			case !known:
				problems = append(problems, Problem{Kind: ErrUnknownDependency, Index: i, Node: n.Name, Dep: d})
			case first[n.Name] == i && n.Name != "":
				edges[i] = append(edges[i], j)
			}
			seen[d] = true
		}
		for _, detail := range policyProblems(n) {
			problems = append(problems, Problem{Kind: ErrInvalidPolicy, Index: i, Node: n.Name, Detail: detail})
		}
	}
	for _, c := range cycles(edges) {
		path := make([]string, len(c)+1)
		for k, i := range c {
			path[k] = nodes[i].Name
		}
		path[len(c)] = nodes[c[0]].Name
		problems = append(problems, Problem{Kind: ErrCycle, Index: c[0], Node: nodes[c[0]].Name, Cycle: path})
	}
	return problems
}

func policyProblems(n Node) []string {
	var out []string
	if n.Retries < 0 {
		out = append(out, fmt.Sprintf("retries must not be negative, got %d", n.Retries))
	}
	if n.Timeout < 0 {
		out = append(out, fmt.Sprintf("timeout must not be negative, got %s", n.Timeout))
	}
	b := n.Backoff
	if b.Initial < 0 {
		out = append(out, fmt.Sprintf("backoff initial delay must not be negative, got %s", b.Initial))
	}
	if b.Max < 0 {
		out = append(out, fmt.Sprintf("backoff max delay must not be negative, got %s", b.Max))
	}
	if b.Multiplier != 0 && !(b.Multiplier >= 1 && !math.IsInf(b.Multiplier, 1)) {
		out = append(out, fmt.Sprintf("backoff multiplier must be at least 1, got %g", b.Multiplier))
	}
	if b.Jitter != NoJitter && b.Jitter != FullJitter && b.Jitter != EqualJitter {
		out = append(out, fmt.Sprintf("unknown backoff jitter %d", b.Jitter))
	}
	return out
}

// cycles finds the cycles of a directed graph by depth-first search from each vertex in
// order, following edges in order: one cycle per back edge, so at least one in every group
// of mutually dependent vertices. Each cycle is rotated to start at its lowest vertex and
// reported once, sorted.
func cycles(edges [][]int) [][]int {
	const (
		white = iota // not visited
		grey         // on the current path
		black        // done
	)
	color := make([]int, len(edges))
	var path []int
	var found [][]int
	seen := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		path = append(path, i)
		for _, j := range edges[i] {
			switch color[j] {
			case white:
				visit(j)
			case grey:
				start := slices.Index(path, j)
				c := rotateToMin(slices.Clone(path[start:]))
				if key := fmt.Sprint(c); !seen[key] {
					seen[key] = true
					found = append(found, c)
				}
			}
		}
		path = path[:len(path)-1]
		color[i] = black
	}
	for i := range edges {
		if color[i] == white {
			visit(i)
		}
	}
	slices.SortFunc(found, slices.Compare)
	return found
}

func rotateToMin(c []int) []int {
	m := slices.Index(c, slices.Min(c))
	return slices.Concat(c[m:], c[:m])
}
