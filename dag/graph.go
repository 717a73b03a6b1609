package dag

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Task is the work of one node. Run is called once per attempt, with attempt counting
// from 1. The context is cancelled when the run is cancelled, and carries the node's
// per-attempt timeout if it has one; a task must return soon after ctx is done, because
// the executor waits for it. Returning an error wrapped with Permanent stops the retries.
type Task interface {
	Run(ctx context.Context, attempt int) error
}

// TaskFunc adapts a function to a Task.
type TaskFunc func(ctx context.Context, attempt int) error

// Run calls f(ctx, attempt).
func (f TaskFunc) Run(ctx context.Context, attempt int) error { return f(ctx, attempt) }

// Node is one vertex of a graph as the caller declares it: a unique name, the work, the
// names of the nodes it depends on, and its retry and timeout policy.
type Node struct {
	Name      string
	Task      Task
	DependsOn []string

	// Retries is how many attempts may follow a failed first one (0: no retry).
	Retries int
	// Backoff is the wait between a failed attempt and the next one.
	Backoff Backoff
	// Timeout bounds each attempt (0: no limit other than the run's context). It is
	// measured by the real clock, through the attempt's context deadline.
	Timeout time.Duration
}

// Graph is a validated, immutable DAG of nodes. Build one with New.
type Graph struct {
	nodes      []Node         // declaration order; DependsOn copied and deduplicated
	index      map[string]int // name → position in nodes
	deps       [][]int        // deps[i]: positions of the nodes i depends on
	dependents [][]int        // dependents[i]: positions of the nodes that depend on i, ascending
	order      []int          // ready order
}

// New validates nodes and builds a Graph from them. The nodes are copied; later changes
// to the slice do not affect the graph. If anything is wrong, New returns a
// *ValidationError listing every problem.
func New(nodes []Node) (*Graph, error) {
	if problems := validate(nodes); len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return build(nodes), nil
}

// build makes a Graph from nodes that are known to be valid.
func build(nodes []Node) *Graph {
	g := &Graph{
		nodes:      make([]Node, len(nodes)),
		index:      make(map[string]int, len(nodes)),
		deps:       make([][]int, len(nodes)),
		dependents: make([][]int, len(nodes)),
	}
	for i, n := range nodes {
		g.index[n.Name] = i
	}
	for i, n := range nodes {
		n.DependsOn = slices.Clone(n.DependsOn)
		g.nodes[i] = n
		for _, d := range n.DependsOn {
			j := g.index[d]
			g.deps[i] = append(g.deps[i], j)
			g.dependents[j] = append(g.dependents[j], i)
		}
	}
	g.order = readyOrder(g.deps, g.dependents)
	return g
}

// readyOrder is Kahn's algorithm with ties broken by declaration position.
func readyOrder(deps, dependents [][]int) []int {
	pending := make([]int, len(deps))
	ready := &intHeap{}
	for i := range deps {
		pending[i] = len(deps[i])
		if pending[i] == 0 {
			heap.Push(ready, i)
		}
	}
	order := make([]int, 0, len(deps))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, j := range dependents[i] {
			if pending[j]--; pending[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	return order
}

// Len reports the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Names returns the node names in declaration order.
func (g *Graph) Names() []string {
	names := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		names[i] = n.Name
	}
	return names
}

// Node returns a copy of the node called name.
func (g *Graph) Node(name string) (Node, bool) {
	i, ok := g.index[name]
	if !ok {
		return Node{}, false
	}
	n := g.nodes[i]
	n.DependsOn = slices.Clone(n.DependsOn)
	return n, true
}

// Order returns the node names in ready order: a topological order in which, whenever
// several nodes have all their dependencies before them, the one declared first comes
// first. It is the order in which Run starts nodes when MaxParallel is 1.
func (g *Graph) Order() []string {
	names := make([]string, len(g.order))
	for k, i := range g.order {
		names[k] = g.nodes[i].Name
	}
	return names
}

// Subgraph returns a graph of only the named nodes, in their declaration order, as when a
// user runs chosen stages by hand (`--stage NAME`). Dependencies on nodes that are not
// selected are dropped: they count as already satisfied, and those nodes do not run. To
// run a node together with everything it needs, select g.Upstream(names...). Unknown
// names are an error, all of them listed; repeated names are fine.
func (g *Graph) Subgraph(names ...string) (*Graph, error) {
	keep, err := g.lookup(names)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for i, n := range g.nodes {
		if !keep[i] {
			continue
		}
		n.DependsOn = slices.DeleteFunc(slices.Clone(n.DependsOn), func(d string) bool {
			return !keep[g.index[d]]
		})
		nodes = append(nodes, n)
	}
	return build(nodes), nil
}

// Upstream returns the named nodes and every node they depend on, directly or not, in
// declaration order.
func (g *Graph) Upstream(names ...string) ([]string, error) {
	return g.closure(names, g.deps)
}

// Downstream returns the named nodes and every node that depends on them, directly or
// not, in declaration order.
func (g *Graph) Downstream(names ...string) ([]string, error) {
	return g.closure(names, g.dependents)
}

func (g *Graph) closure(names []string, edges [][]int) ([]string, error) {
	keep, err := g.lookup(names)
	if err != nil {
		return nil, err
	}
	var stack []int
	for i, k := range keep {
		if k {
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range edges[i] {
			if !keep[j] {
				keep[j] = true
				stack = append(stack, j)
			}
		}
	}
	var out []string
	for i, k := range keep {
		if k {
			out = append(out, g.nodes[i].Name)
		}
	}
	return out, nil
}

// lookup marks the named nodes; unknown names are an error naming all of them.
func (g *Graph) lookup(names []string) ([]bool, error) {
	keep := make([]bool, len(g.nodes))
	var unknown []string
	for _, name := range names {
		i, ok := g.index[name]
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%q", name))
			continue
		}
		keep[i] = true
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown node %s", strings.Join(unknown, ", "))
	}
	return keep, nil
}

// intHeap is a min-heap of node positions.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
