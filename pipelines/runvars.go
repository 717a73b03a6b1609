package pipelines

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Run-time references: ${params.NAME}, ${run.slot} and ${run.slot_date} in stage values
// are left as written when a file is loaded (Load checks that they name a declared
// parameter or a run value) and expand when a run binds its values (Spec.Bind), so one
// definition serves every slot and every backfill reads its own slot's files.

var runRef = regexp.MustCompile(`\$\{(params|run)\.([A-Za-z0-9_]*)\}`)

// RunValueNames are the ${run.NAME} references: the run's slot in UTC (RFC 3339) and its
// date in the pipeline's timezone (2006-01-02).
var RunValueNames = []string{"slot", "slot_date"}

// RunValues are what a run's references expand to.
type RunValues struct {
	// Params are the parameter values, as ResolveParams returns them.
	Params map[string]string
	// Slot is the run's slot: the scheduled instant, or the trigger time of a manual run.
	Slot time.Time
}

// checkRunRefs reports run-time references outside stage values and those that name no
// declared parameter or run value.
func checkRunRefs(ps *problems, root *yaml.Node, spec *Spec) {
	declared := map[string]bool{}
	for _, p := range spec.Params {
		declared[p.Name] = true
	}
	var walk func(n *yaml.Node, inStages bool)
	walk = func(n *yaml.Node, inStages bool) {
		switch n.Kind {
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, inStages)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], inStages || (n == root && n.Content[i].Value == "stages"))
			}
		case yaml.ScalarNode:
			for _, m := range runRef.FindAllStringSubmatch(n.Value, -1) {
				switch {
				case !inStages:
					ps.at(n, "%s: run-time references (${params.*}, ${run.*}) may only appear in stage values", m[0])
				case m[1] == "params" && !declared[m[2]]:
					ps.at(n, "%s: no parameter %q is declared under params", m[0], m[2])
				case m[1] == "run" && !slices.Contains(RunValueNames, m[2]):
					ps.at(n, "%s: unknown run value %q; expected ${run.slot} or ${run.slot_date}", m[0], m[2])
				}
			}
		}
	}
	walk(root, false)
}

// expandRunRefs replaces the run-time references in every scalar below n with vars
// ("params.NAME", "run.slot", ...).
func expandRunRefs(n *yaml.Node, vars map[string]string) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			expandRunRefs(c, vars)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandRunRefs(n.Content[i+1], vars)
		}
	case yaml.ScalarNode:
		n.Value = runRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := runRef.FindStringSubmatch(ref)
			if v, ok := vars[m[1]+"."+m[2]]; ok {
				return v
			}
			return ref
		})
	}
}

// HasRunRefs reports whether the pipeline's stages use run-time references, so that a
// run must bind them.
func (s *Spec) HasRunRefs() bool { return runRef.Match(s.Source) }

// ResolveParams checks given parameter values (by name) against the declarations and
// fills in defaults. Every problem is reported at once: an undeclared name, a value of
// the wrong type, a parameter with no default that was not given.
func (s *Spec) ResolveParams(given map[string]string) (map[string]string, error) {
	out := map[string]string{}
	var problems []string
	declared := map[string]bool{}
	for _, p := range s.Params {
		declared[p.Name] = true
		v, ok := given[p.Name]
		switch {
		case ok:
			if err := checkParamValue(p.Type, v); err != nil {
				problems = append(problems, fmt.Sprintf("param %s (%s): %v", p.Name, p.Type, err))
				continue
			}
			out[p.Name] = v
		case p.Default != nil:
			out[p.Name] = *p.Default
		default:
			problems = append(problems, fmt.Sprintf("param %s (%s) has no default: give it with --param %s=VALUE", p.Name, p.Type, p.Name))
		}
	}
	var unknown []string
	for name := range given {
		if !declared[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		names := make([]string, len(s.Params))
		for i, p := range s.Params {
			names[i] = p.Name
		}
		problems = append(problems, fmt.Sprintf("param %s is not declared in pipeline %s (declared: %s)", name, s.Name, or(strings.Join(names, ", "), "none")))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

// Bind returns the pipeline with its run-time references expanded for one run: the
// definition is read again with the values, so a value that makes a stage invalid is a
// problem at its line and column. A pipeline without references is returned as is.
// Params must be resolved (ResolveParams).
func (s *Spec) Bind(v RunValues) (*Spec, error) {
	if !s.HasRunRefs() {
		return s, nil
	}
	vars := map[string]string{
		"run.slot":      v.Slot.UTC().Format(time.RFC3339),
		"run.slot_date": v.Slot.In(s.Location).Format(time.DateOnly),
	}
	for name, val := range v.Params {
		vars["params."+name] = val
	}
	opts := s.opts
	opts.vars = vars
	bound, err := Parse(s.File, bytes.Clone(s.Source), opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s with this run's values: %w", s.Name, err)
	}
	return bound, nil
}

// Options returns the options the pipeline was loaded with (its environment), to read
// another definition the same way (a run record's).
func (s *Spec) Options() Options {
	o := s.opts
	o.vars = nil
	return o
}
