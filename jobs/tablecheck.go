package jobs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
)

// Difference is one way a table that exists differs from its declaration (another tool
// such as Spark may have changed it), with what converges the two.
type Difference struct {
	Table string // declared name
	What  string // e.g. `column valid_from: NOT NULL in the table, nullable in the pipeline`
	Fix   string // e.g. `declare it as it is: {name: valid_from, type: timestamp, nullable: false}`
}

func (d Difference) String() string {
	return fmt.Sprintf("table %s: %s; to converge, %s", d.Table, d.What, d.Fix)
}

// DifferenceError refuses a run on tables that differ from their declarations.
type DifferenceError struct{ Differences []Difference }

func (e *DifferenceError) Error() string {
	lines := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		lines[i] = d.String()
	}
	return "the tables differ from the pipeline's declarations:\n  " + strings.Join(lines, "\n  ")
}

// CheckTable compares the latest snapshot of an existing table with its declaration.
// Safe schema changes (delta.PlanEvolution: nullable columns added, types widened, NOT
// NULL dropped, columns renamed with renamed_from, column mapping turned on) come back
// as the evolution that converges them in one metadata-only commit (nil when the schema
// is as declared); everything else is a difference, with what converges it: a column
// change no metadata commit makes, identity, the partition columns, a declared property.
// Nullable columns only the table has are no difference in a table whose schema a
// stage may widen (SchemaEvolution). pipelineFile names the pipeline in the commands
// the differences suggest.
func CheckTable(decl *Table, snap *delta.Snapshot, pipelineFile string) (*delta.Evolution, []Difference) {
	var out []Difference
	add := func(what, fix string, args ...any) {
		out = append(out, Difference{Table: decl.Name, What: what, Fix: fmt.Sprintf(fix, args...)})
	}
	ev, problems := delta.PlanEvolution(snap, decl.Schema, delta.EvolutionOptions{
		RenamedFrom:    decl.RenamedFrom,
		KeepUndeclared: decl.SchemaEvolution,
		ColumnMapping:  delta.ColumnMappingMode(decl.Properties),
	})
	for _, p := range problems {
		fix := p.How
		if f := snap.Schema().Field(p.Column); f != nil && strings.HasPrefix(fix, "declare it") && !strings.Contains(fix, "drop it") && !strings.Contains(fix, "declare it as ") {
			fix += " (the table has " + columnYAML(f) + ")"
		}
		if strings.Contains(fix, "TABLE --drop-column") {
			fix = strings.Replace(fix, "TABLE --drop-column", decl.Name+" --pipeline "+shellWord(pipelineFile)+" --drop-column", 1)
		}
		add("column "+p.Column+": "+p.What, "%s", fix)
	}
	if len(ev.Steps) == 0 {
		ev = nil
	}
	if got := snap.PartitionColumns(); !slices.EqualFunc(got, decl.PartitionBy, strings.EqualFold) {
		add(fmt.Sprintf("partitioned by %s in the table, by %s in the pipeline", columnList(got), columnList(decl.PartitionBy)),
			"declare partition_by: [%s] (a table's partitioning cannot change)", strings.Join(got, ", "))
	}
	config := snap.Properties()
	for _, k := range sortedKeys(decl.Properties) {
		want := decl.Properties[k]
		if delta.PropertyMatches(config, k, want) || k == delta.ColumnMappingProperty {
			continue // (column mapping is the evolution's)
		}
		got, ok := config[k]
		what := fmt.Sprintf("property %s is %q in the table, %q in the pipeline", k, got, want)
		declare := fmt.Sprintf("declare %s: %s", k, got)
		if !ok {
			what = fmt.Sprintf("property %s is not set in the table, %q in the pipeline", k, want)
			declare = "remove it from the declaration"
		}
		add(what, "run orchestrator table properties %s --pipeline %s --set %s, or %s",
			decl.Name, shellWord(pipelineFile), shellWord(k+"="+want), declare)
	}
	return ev, out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func columnList(cols []string) string {
	if len(cols) == 0 {
		return "nothing"
	}
	return strings.Join(cols, ", ")
}

// typeName spells a type as a pipeline declares it.
func typeName(t delta.DataType) string {
	switch s := t.String(); s {
	case delta.TypeLong:
		return "bigint"
	case delta.TypeInteger:
		return "int"
	case delta.TypeShort:
		return "smallint"
	case delta.TypeByte:
		return "tinyint"
	default:
		return s
	}
}

// columnYAML is the column's entry in a pipeline's columns list.
func columnYAML(f *delta.StructField) string {
	typ := typeName(f.Type)
	if strings.ContainsAny(typ, "(,<") {
		typ = `"` + typ + `"`
	}
	s := fmt.Sprintf("{name: %s, type: %s, nullable: %t", f.Name, typ, f.Nullable)
	if c, ok, err := delta.IdentityField(f); err == nil && ok {
		s += fmt.Sprintf(", identity: {start: %d, step: %d", c.Start, c.Step)
		if c.AllowExplicitInsert {
			s += ", allow_explicit_insert: true"
		}
		s += "}"
	}
	return s + "}"
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
