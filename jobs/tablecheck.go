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

// CheckTable compares the latest snapshot of an existing table with its declaration:
// every column (name, type, nullability, identity), the partition columns and every
// declared property. Columns only the table has are differences too, except nullable
// ones in a table whose schema a stage may widen (SchemaEvolution). pipelineFile names
// the pipeline in the commands the differences suggest.
func CheckTable(decl *Table, snap *delta.Snapshot, pipelineFile string) []Difference {
	var out []Difference
	add := func(what, fix string, args ...any) {
		out = append(out, Difference{Table: decl.Name, What: what, Fix: fmt.Sprintf(fix, args...)})
	}
	have := map[string]*delta.StructField{}
	for _, f := range snap.Schema().Fields {
		have[strings.ToLower(f.Name)] = f
	}
	declared := map[string]bool{}
	for _, d := range decl.Schema.Fields {
		declared[strings.ToLower(d.Name)] = true
		f := have[strings.ToLower(d.Name)]
		switch {
		case f == nil:
			add(fmt.Sprintf("column %s is declared, but the table has no such column", d.Name),
				"remove it from the declaration (orchestrator adds no columns to an existing table)")
		case f.Type.String() != d.Type.String():
			add(fmt.Sprintf("column %s: %s in the table, %s in the pipeline", d.Name, typeName(f.Type), typeName(d.Type)),
				"declare it as it is: %s", columnYAML(f))
		case f.Nullable != d.Nullable:
			add(fmt.Sprintf("column %s: %s in the table, %s in the pipeline", d.Name, nullability(f.Nullable), nullability(d.Nullable)),
				"declare it as it is: %s", columnYAML(f))
		case identityOf(f) != identityOf(d):
			add(fmt.Sprintf("column %s: %s in the table, %s in the pipeline", d.Name, identityOf(f), identityOf(d)),
				"declare it as it is: %s", columnYAML(f))
		}
	}
	for _, f := range snap.Schema().Fields {
		if declared[strings.ToLower(f.Name)] || decl.SchemaEvolution && f.Nullable {
			continue
		}
		add(fmt.Sprintf("column %s (%s) is in the table but not declared", f.Name, typeName(f.Type)),
			"declare it: %s", columnYAML(f))
	}
	if got := snap.PartitionColumns(); !slices.EqualFunc(got, decl.PartitionBy, strings.EqualFold) {
		add(fmt.Sprintf("partitioned by %s in the table, by %s in the pipeline", columnList(got), columnList(decl.PartitionBy)),
			"declare partition_by: [%s] (a table's partitioning cannot change)", strings.Join(got, ", "))
	}
	config := snap.Properties()
	for _, k := range sortedKeys(decl.Properties) {
		want := decl.Properties[k]
		if delta.PropertyMatches(config, k, want) {
			continue
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
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func nullability(nullable bool) string {
	if nullable {
		return "nullable"
	}
	return "NOT NULL"
}

func columnList(cols []string) string {
	if len(cols) == 0 {
		return "nothing"
	}
	return strings.Join(cols, ", ")
}

// identityOf describes a column's identity generation, "" for none.
func identityOf(f *delta.StructField) string {
	c, ok, err := delta.IdentityField(f)
	switch {
	case err != nil:
		return "an unreadable identity (" + err.Error() + ")"
	case !ok:
		return "no identity"
	}
	s := fmt.Sprintf("identity (start %d, step %d", c.Start, c.Step)
	if c.AllowExplicitInsert {
		s += ", explicit inserts allowed"
	}
	return s + ")"
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
