package pipelines

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a pipeline file, at a position in it.
type Problem struct {
	File string
	Line int // 1-based; 0 when the problem concerns the whole file
	Col  int // 1-based
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
}

// Error lists every problem found in a pipeline file, sorted by position.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems for one file.
type problems struct {
	file string
	list []Problem
}

// at records a problem at a node's position (the file as a whole when n is nil).
func (ps *problems) at(n *yaml.Node, format string, args ...any) {
	p := Problem{File: ps.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Col = n.Line, n.Column
	}
	ps.list = append(ps.list, p)
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	list = slices.Compact(list)
	return &Error{Problems: list}
}
