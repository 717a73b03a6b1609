package expr

import (
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"

	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Matcher evaluates a Predicate on record batches, for callers that test rows of their
// own (a stage deciding which source rows are deletes).
type Matcher struct{ b *Bound }

// NewMatcher binds p to schema: every column it names must be in schema (nested fields
// with dots), and every literal must fit its column's type.
func NewMatcher(p Predicate, schema *dschema.StructType) (*Matcher, error) {
	b, err := Bind(p, schema, nil)
	if err != nil {
		return nil, err
	}
	return &Matcher{b: b}, nil
}

// Match reports, per row of rec, whether the predicate is true; a row where it is null
// (a comparison with a null value) does not match. rec must hold the predicate's
// columns, found by name, in the Arrow types of the schema the matcher was bound to.
func (m *Matcher) Match(rec arrow.RecordBatch) ([]bool, error) {
	n := int(rec.NumRows())
	tri, err := m.b.Eval(rec, n)
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for i, t := range tri {
		out[i] = t == True
	}
	return out, nil
}

// Columns lists the column names a predicate reads, in the order it first
// names them, each once (compared ignoring case).
func Columns(p Predicate) []string {
	var out []string
	seen := map[string]bool{}
	add := func(c string) {
		if k := strings.ToLower(c); !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	var walk func(Predicate)
	walk = func(p Predicate) {
		switch p := p.(type) {
		case *Comparison:
			add(p.Column)
		case *InList:
			add(p.Column)
		case *NullCheck:
			add(p.Column)
		case *AndPredicate:
			for _, t := range p.Terms {
				walk(t)
			}
		case *OrPredicate:
			for _, t := range p.Terms {
				walk(t)
			}
		}
	}
	walk(p)
	return out
}
