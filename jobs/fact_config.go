package jobs

import (
	"fmt"
	"slices"
	"strings"
)

// FactLoadConfig configures a fact_load stage: facts read from a table (its snapshot or
// its change feed) written to a fact table in which each lookup adds the surrogate key of
// the dimension version valid at the fact's time.
type FactLoadConfig struct {
	// Source is the declared table the facts come from. With SourceChanges the stage
	// reads its change feed since the last loaded version (inserts and updates upsert a
	// fact, deletes delete it); otherwise each new source version is the whole set of
	// facts (facts it lacks are deleted, changed ones updated, new ones inserted).
	Source        string `yaml:"source"`
	SourceChanges bool   `yaml:"source_changes"`
	// Target is the fact table: the source's columns it declares plus each lookup's key.
	Target string `yaml:"target"`
	// Keys identify a fact (e.g. sale_id): a source never holds two facts with one key.
	Keys []string `yaml:"keys"`
	// Lookups are the dimensions the facts are keyed by.
	Lookups []FactLookup `yaml:"lookups"`
	// QuarantineTable receives the new facts a lookup with missing: quarantine finds no
	// version for (with QuarantineColumns, as an ingest's quarantine table has).
	QuarantineTable string `yaml:"quarantine_table"`
}

// FactLookup keys facts by one type 2 dimension (the target of an scd2_merge).
type FactLookup struct {
	// Dimension is the declared dimension table.
	Dimension string `yaml:"dimension"`
	// On maps fact columns to the dimension's business key columns.
	On map[string]string `yaml:"on"`
	// At is the fact's time column: the version with valid_from <= at < valid_to is its.
	At string `yaml:"at"`
	// Key is the fact table column (bigint) the version's surrogate key goes to.
	Key string `yaml:"key"`
	// Missing says what a fact with no version at its time gets: unknown (default: the
	// key UnknownKey), fail (the run fails naming the fact, nothing is written) or
	// quarantine (a new fact goes to the stage's quarantine table instead of the fact
	// table; a loaded fact that loses its version gets UnknownKey), or inferred (a new
	// fact whose business key the dimension has no version of gets the key of a
	// placeholder version the stage adds, flagged by the dimension's columns.inferred,
	// which the dimension's merge later fills in place; other misses get UnknownKey).
	Missing string `yaml:"missing"`
	// UnknownKey is the key of the unknown member (default -1).
	UnknownKey *int64 `yaml:"unknown_key"`

	// dim are the dimension's SCD columns, from the scd2_merge that maintains it
	// (SetDimensionColumns); unset, the surrogate key is the dimension's identity column
	// and valid_from/valid_to have their default names.
	dim SCDColumns
	// openEnd is the dimension's open_end (SetDimensionOpenEnd): the valid_to of its
	// current versions, which the member row takes and lookups read as open.
	openEnd SCDTime
	// firstFrom is the dimension's first_valid_from (SetDimensionFirstValidFrom): where
	// an inferred member's placeholder version starts.
	firstFrom SCDTime
}

// The missing policies of a lookup.
const (
	MissingUnknown    = "unknown"
	MissingFail       = "fail"
	MissingQuarantine = "quarantine"
	MissingInferred   = "inferred"
)

// DefaultUnknownKey is the surrogate key a fact gets when its dimension has no version
// at its time and the lookup says missing: unknown.
const DefaultUnknownKey = -1

// SetDimensionColumns records the SCD columns of the lookup's dimension (as the
// scd2_merge that maintains it names them); the pipeline loader calls it.
func (l *FactLookup) SetDimensionColumns(c SCDColumns) { l.dim = c.WithDefaults() }

// SetDimensionOpenEnd records the open_end of the scd2_merge that maintains the
// lookup's dimension; the pipeline loader calls it.
func (l *FactLookup) SetDimensionOpenEnd(o SCDTime) { l.openEnd = o }

// SetDimensionFirstValidFrom records the first_valid_from of the scd2_merge that
// maintains the lookup's dimension; the pipeline loader calls it.
func (l *FactLookup) SetDimensionFirstValidFrom(t SCDTime) { l.firstFrom = t }

// DimensionColumns returns the dimension's SCD columns as set (SurrogateKey "" when
// none was: the stage then takes the dimension's identity column).
func (l *FactLookup) DimensionColumns() SCDColumns { return l.dim.WithDefaults() }

// unknownKey is the lookup's unknown member key.
func (l *FactLookup) unknownKey() int64 {
	if l.UnknownKey != nil {
		return *l.UnknownKey
	}
	return DefaultUnknownKey
}

// factCols returns the lookup's fact columns in a fixed order and the dimension columns
// they match.
func (l *FactLookup) factCols() (fact, dim []string) {
	for fc := range l.On {
		fact = append(fact, fc)
	}
	slices.Sort(fact)
	for _, fc := range fact {
		dim = append(dim, l.On[fc])
	}
	return fact, dim
}

// Kind implements Config.
func (*FactLoadConfig) Kind() Kind { return KindFactLoad }

// Tables implements Config: the source and the dimensions are read.
func (c *FactLoadConfig) Tables() (reads, writes []string) {
	reads = []string{c.Source}
	for _, l := range c.Lookups {
		if l.Dimension != "" && !slices.Contains(reads, l.Dimension) {
			reads = append(reads, l.Dimension)
		}
	}
	writes = []string{c.Target}
	if c.QuarantineTable != "" {
		writes = append(writes, c.QuarantineTable)
	}
	// A lookup that does not fail on a miss adds the unknown member row (and with
	// missing: inferred placeholder versions) to its dimension.
	for _, l := range c.Lookups {
		if l.Dimension != "" && l.Missing != MissingFail && !slices.Contains(writes, l.Dimension) {
			writes = append(writes, l.Dimension)
		}
	}
	return reads, writes
}

// RowKeys implements RowKeyed: the facts' keys.
func (c *FactLoadConfig) RowKeys(table string) []string { return targetKeys(table, c.Target, c.Keys) }

// Validate implements Config.
func (c *FactLoadConfig) Validate() []FieldError {
	var errs []FieldError
	add := func(f, format string, a ...any) { errs = append(errs, FieldError{f, fmt.Sprintf(format, a...)}) }
	if c.Source == "" {
		add("source", "required: the table the facts come from")
	}
	if c.Target == "" {
		add("target", "required: the fact table to write")
	}
	if c.Source != "" && c.Source == c.Target {
		add("target", "must differ from source")
	}
	if len(c.Keys) == 0 {
		add("keys", "required: the columns that identify a fact (e.g. sale_id)")
	}
	errs = append(errs, validateKeys(c.Keys)...)
	if len(c.Lookups) == 0 {
		add("lookups", "required: at least one dimension to key the facts by")
	}
	keyCols := map[string]string{}
	for _, k := range c.Keys {
		keyCols[strings.ToLower(k)] = "keys"
	}
	for i, l := range c.Lookups {
		f := fmt.Sprintf("lookups[%d]", i)
		if l.Dimension == "" {
			add(f+".dimension", "required: the scd2_merge target to look up")
		}
		if l.Dimension != "" && (l.Dimension == c.Target || l.Dimension == c.Source) {
			add(f+".dimension", "must differ from the stage's source and target")
		}
		if len(l.On) == 0 {
			add(f+".on", "required: fact column -> dimension business key column, e.g. {customer_id: customer_id}")
		}
		if l.At == "" {
			add(f+".at", "required: the fact's time column (valid_from <= at < valid_to)")
		}
		switch {
		case l.Key == "":
			add(f+".key", "required: the fact table column the surrogate key goes to")
		case keyCols[strings.ToLower(l.Key)] != "":
			add(f+".key", "%q is already written by %s", l.Key, keyCols[strings.ToLower(l.Key)])
		default:
			keyCols[strings.ToLower(l.Key)] = f + ".key"
		}
		for fc := range l.On {
			if strings.EqualFold(fc, l.Key) {
				add(f+".on", "fact column %q is also the lookup's key column", fc)
			}
		}
		if l.UnknownKey != nil && *l.UnknownKey > 0 {
			add(f+".unknown_key", "%d: must be 0 or negative (the unknown member row's key; the dimension's identity column hands out positive keys)", *l.UnknownKey)
		}
		switch l.Missing {
		case "", MissingUnknown, MissingQuarantine:
		case MissingFail:
			if l.UnknownKey != nil {
				add(f+".unknown_key", "only used with missing: unknown or quarantine")
			}
		case MissingInferred:
		default:
			add(f+".missing", "unknown value %q; expected unknown, inferred, fail or quarantine", l.Missing)
		}
	}
	quarantines := slices.ContainsFunc(c.Lookups, func(l FactLookup) bool { return l.Missing == MissingQuarantine })
	switch {
	case quarantines && c.QuarantineTable == "":
		add("quarantine_table", "required when a lookup has missing: quarantine")
	case !quarantines && c.QuarantineTable != "":
		add("quarantine_table", "only used when a lookup has missing: quarantine")
	case c.QuarantineTable != "" && (c.QuarantineTable == c.Target || c.QuarantineTable == c.Source):
		add("quarantine_table", "must differ from the source and the target")
	}
	return errs
}
