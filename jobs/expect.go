package jobs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// Expectation is one data quality check declared under a stage's `expectations:`.
// Exactly one of Expect (a row check) or the table checks (Unique, NotNull, RowCount,
// MaxChange, SCD2Invariants) is set.
//
// A row check is a predicate in the --where language over each row the stage writes; a
// row passes when the predicate is true (a NULL result is a violation: write `x IS NULL
// OR ...` to let nulls pass). OnViolation says what a violating row does: warn (counted,
// written), drop (counted, not written), quarantine (counted, written to the stage's
// quarantine table with the expectation's name instead of the target) or fail (the stage
// stops before its commit: the table is unchanged).
//
// A table check judges the target table as the stage's commit left it; warn records the
// result, fail marks the stage (and run) failed after the commit and names the command
// that rolls the table back.
type Expectation struct {
	Name        string `yaml:"name"`
	Expect      string `yaml:"expect"`
	OnViolation string `yaml:"on_violation"`
	// Unique columns: no two rows share their values (rows with a NULL in them are
	// exempt, as in SQL). NotNull columns: no row holds NULL in any of them.
	Unique  []string `yaml:"unique"`
	NotNull []string `yaml:"not_null"`
	// RowCount bounds the table's rows (either bound may be omitted).
	RowCount *RowCountBounds `yaml:"row_count"`
	// MaxChange bounds how much the table's row count may move, up or down, from the
	// version before the stage's first commit to the version it leaves (e.g. 20%).
	MaxChange *Percent `yaml:"max_change"`
	// SCD2Invariants (scd2_merge only) checks the dimension: at most one current row per
	// key, and no two versions of a key whose validity intervals overlap.
	SCD2Invariants bool `yaml:"scd2_invariants"`
}

// RowCountBounds are the bounds of a row_count check.
type RowCountBounds struct {
	Min *int64 `yaml:"min"`
	Max *int64 `yaml:"max"`
}

// Percent is a share written as "20%" (or a fraction such as 0.2).
type Percent float64

var percentRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$`)

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Percent) UnmarshalText(b []byte) error {
	s := string(b)
	if m := percentRE.FindStringSubmatch(s); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		*p = Percent(f / 100)
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a percentage; expected e.g. 20%% (or a fraction such as 0.2)", s)
	}
	*p = Percent(f)
	return nil
}

func (p Percent) String() string { return strconv.FormatFloat(float64(p)*100, 'f', -1, 64) + "%" }

// The on_violation actions.
const (
	ActionWarn       = "warn"
	ActionDrop       = "drop"
	ActionQuarantine = "quarantine"
	ActionFail       = "fail"
)

// The check kinds of an expectation, as results name them.
const (
	CheckExpect         = "expect"
	CheckUnique         = "unique"
	CheckNotNull        = "not_null"
	CheckRowCount       = "row_count"
	CheckMaxChange      = "max_change"
	CheckSCD2Invariants = "scd2_invariants"
)

// Check names the kind of check the expectation declares ("" when it declares none).
func (e *Expectation) Check() string {
	switch {
	case e.Expect != "":
		return CheckExpect
	case len(e.Unique) > 0:
		return CheckUnique
	case len(e.NotNull) > 0:
		return CheckNotNull
	case e.RowCount != nil:
		return CheckRowCount
	case e.MaxChange != nil:
		return CheckMaxChange
	case e.SCD2Invariants:
		return CheckSCD2Invariants
	}
	return ""
}

// RowLevel reports whether the expectation checks each row before the commit.
func (e *Expectation) RowLevel() bool { return e.Expect != "" }

// Action is the expectation's on_violation (default warn).
func (e *Expectation) Action() string {
	if e.OnViolation == "" {
		return ActionWarn
	}
	return e.OnViolation
}

// RowChecksSupported reports whether a stage kind checks its written rows against row
// expectations (expect:); the others take table checks only.
func RowChecksSupported(k Kind) bool {
	switch k {
	case KindIngest, KindCaptureHistory, KindSCD1Merge, KindSCD2Merge, KindFactLoad:
		return true
	}
	return false
}

// rowActionRefused says why a stage's config cannot take a row check's action ("" when
// it can): leaving a row out must not make what the stage writes wrong.
func rowActionRefused(cfg Config, action string) string {
	if action != ActionDrop && action != ActionQuarantine {
		return ""
	}
	switch c := cfg.(type) {
	case *IngestConfig:
		if c.Mode == "snapshot" {
			return "a snapshot ingest deletes the keys its files lack, so a row left out would delete its key's row from the table; use warn or fail, or load with mode: upsert"
		}
	case *CaptureHistoryConfig:
		return "the history is the record of every change its source made, version by version: with a change left out it would no longer replay to the source (an update's post-image without its pre-image, a delete of a row it never inserted, a later update from a value it never held), and the source's version is marked captured, so the change never comes back; use warn or fail, or check the source's own writer (its ingest or merge) instead"
	case *FactLoadConfig:
		switch {
		case action != ActionQuarantine:
		case !c.SourceChanges:
			return "a fact load quarantines the new facts of its source's change feed (source_changes: true); a snapshot's facts are all read again each time it moves and would be quarantined again; use drop, warn or fail"
		case c.QuarantineTable == "":
			return fmt.Sprintf("quarantine needs the stage's quarantine_table: declare one with the columns %s (and, to hold the expectation's name in a column of its own, expectation)", strings.Join(QuarantineColumns, ", "))
		}
	case *SCD1Config:
		if why := mergeQuarantineRefused(action, c.SourceChanges, c.QuarantineTable, c.Source, c.Target); why != "" {
			return why
		}
		if !c.SourceChanges && c.Deletes == "delete" {
			return "this merge reads its source's snapshot and deletes the keys the snapshot lacks, so a dropped row would delete its key; read the source's change feed (source_changes: true), keep deleted keys (deletes: ignore), or use warn or fail"
		}
	case *SCD2Config:
		if why := mergeQuarantineRefused(action, c.SourceChanges, c.QuarantineTable, c.Source, c.Target); why != "" {
			return why
		}
		if !c.SourceChanges && c.Deletes != "" && c.Deletes != "ignore" {
			return "this merge reads its source's snapshot and closes the keys the snapshot lacks, so a dropped row would end its key's current version; read the source's change feed (source_changes: true), keep deleted keys open (deletes: ignore), or use warn or fail"
		}
	}
	return ""
}

// mergeQuarantineRefused says why a merge cannot quarantine ("" when it can): it
// quarantines the change events it reads from its source's change feed into its own
// quarantine table.
func mergeQuarantineRefused(action string, changes bool, table, source, target string) string {
	switch {
	case action != ActionQuarantine:
		return ""
	case !changes:
		return "a merge quarantines the change events of its source's change feed (source_changes: true); a snapshot's rows are all read again on each run and would be quarantined again; use drop (with deletes: ignore), warn or fail"
	case table == "":
		return fmt.Sprintf("quarantine needs the stage's quarantine_table: declare one with the columns %s (and, to hold the expectation's name in a column of its own, expectation)", strings.Join(QuarantineColumns, ", "))
	case table == source || table == target:
		return "the quarantine_table must differ from the source and the target"
	}
	return ""
}

// ExpectationTarget is the table a stage's table checks judge: the table it writes its
// rows to ("" for a stage that writes none).
func ExpectationTarget(cfg Config) string {
	switch c := cfg.(type) {
	case *IngestConfig:
		return c.Target
	case *CaptureHistoryConfig:
		return c.Target
	case *SCD1Config:
		return c.Target
	case *SCD2Config:
		return c.Target
	case *FactLoadConfig:
		return c.Target
	}
	return ""
}

var expectationNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateExpectations reports the problems of a stage's expectations, each with its
// field path ("expectations[1].expect"); cfg is the stage's config (nil when it did not
// decode). A predicate that does not parse is reported with the parser's position.
func ValidateExpectations(cfg Config, exps []Expectation) []FieldError {
	var errs []FieldError
	seen := map[string]bool{}
	for i := range exps {
		e := &exps[i]
		at := func(f string) string { return fmt.Sprintf("expectations[%d]%s", i, f) }
		add := func(f, format string, a ...any) {
			msg := fmt.Sprintf(format, a...)
			if e.Name != "" {
				msg = "expectation " + e.Name + ": " + msg
			}
			errs = append(errs, FieldError{at(f), msg})
		}
		switch {
		case e.Name == "":
			add("", "name: required: a name for the check (letters, digits, '_')")
		case !expectationNameRE.MatchString(e.Name):
			add(".name", "%q is not a valid name: expected letters, digits and '_', not starting with a digit", e.Name)
		case seen[strings.ToLower(e.Name)]:
			add(".name", "declared twice in this stage")
		}
		seen[strings.ToLower(e.Name)] = true
		n := 0
		for _, set := range []bool{e.Expect != "", len(e.Unique) > 0, len(e.NotNull) > 0, e.RowCount != nil, e.MaxChange != nil, e.SCD2Invariants} {
			if set {
				n++
			}
		}
		if n != 1 {
			add("", "declare exactly one check: expect (a row predicate), unique, not_null, row_count, max_change or scd2_invariants")
			continue
		}
		if cfg == nil {
			continue
		}
		kind := cfg.Kind()
		if ExpectationTarget(cfg) == "" {
			add("", "a %s stage writes no rows to check; expectations go on ingest, capture_history, scd1_merge, scd2_merge and fact_load stages", kind)
			continue
		}
		switch e.Action() {
		case ActionWarn, ActionFail:
		case ActionDrop, ActionQuarantine:
			if !e.RowLevel() {
				add(".on_violation", "%s applies to row checks (expect:); a table check is warn or fail", e.OnViolation)
			}
		default:
			add(".on_violation", "unknown value %q; expected warn, drop, quarantine or fail", e.OnViolation)
		}
		if e.Action() == ActionQuarantine {
			if ic, ok := cfg.(*IngestConfig); ok && ic.QuarantineTable == "" {
				add(".on_violation", "quarantine needs the stage's quarantine_table (the table on_error: quarantine uses): declare one with the columns %s (and, to hold the expectation's name in a column of its own, expectation)", strings.Join(QuarantineColumns, ", "))
			}
		}
		switch {
		case e.RowLevel():
			if !RowChecksSupported(kind) {
				add(".expect", "row checks run on the stages that write rows (ingest, capture_history, scd1_merge, scd2_merge, fact_load); on a %s stage check its target with unique, not_null, row_count, max_change or scd2_invariants", kind)
				continue
			}
			if why := rowActionRefused(cfg, e.Action()); why != "" {
				add(".on_violation", "%s on this %s stage: %s", e.Action(), kind, why)
			} else if col := factKeyRead(cfg, e); col != "" {
				add(".expect", "%s on this fact_load stage: the predicate reads %s, a key the lookups compute: a re-keying changes it after the fact was judged, and a re-keyed fact is not dropped or quarantined (its stale key would stay); use warn or fail, or missing: quarantine on the lookup", e.Action(), col)
			}
			if fe, ok := checkPredicate(at(".expect"), e.Expect); !ok {
				fe.Msg = "expectation " + e.Name + ": " + fe.Msg
				errs = append(errs, fe)
			}
		case e.RowCount != nil:
			rc := e.RowCount
			if rc.Min == nil && rc.Max == nil {
				add(".row_count", "give min, max or both")
			}
			if rc.Min != nil && *rc.Min < 0 || rc.Max != nil && *rc.Max < 0 {
				add(".row_count", "bounds must be 0 or more")
			}
			if rc.Min != nil && rc.Max != nil && *rc.Min > *rc.Max {
				add(".row_count", "min %d is above max %d", *rc.Min, *rc.Max)
			}
		case e.SCD2Invariants:
			if kind != KindSCD2Merge {
				add(".scd2_invariants", "only on scd2_merge stages (they know the keys and validity columns)")
			}
		}
		for _, cols := range [][]string{e.Unique, e.NotNull} {
			if err := validateKeys(cols); len(err) > 0 {
				add("", "%s", err[0].Msg)
			}
		}
	}
	return errs
}

// ExpectationColumns lists the columns of the target an expectation names (the
// predicate's, unique's, not_null's), for the loader to check against the table.
func ExpectationColumns(e *Expectation) []string {
	switch {
	case e.Expect != "":
		p, err := expr.Parse(e.Expect)
		if err != nil {
			return nil
		}
		return expr.Columns(p)
	case len(e.Unique) > 0:
		return e.Unique
	case len(e.NotNull) > 0:
		return e.NotNull
	}
	return nil
}

// ExpectationResult is the outcome of one expectation in one stage run.
type ExpectationResult struct {
	Name   string
	Check  string // CheckExpect, CheckUnique, ...
	Action string // warn, drop, quarantine, fail
	// Table and Version name the table version a table check judged (a row check: the
	// target, Version -1: the rows were checked before the commit).
	Table   string
	Version int64
	// Rows is what was checked (a row check: rows; a table check: the table's rows),
	// Failed the violating rows (or, for unique and scd2_invariants, the rows of the
	// offending keys; for row_count and max_change, 1 when the check failed).
	Rows   int64
	Failed int64
	// Detail says what failed, with a sample.
	Detail string
}

// Passed reports whether the check found nothing wrong.
func (r *ExpectationResult) Passed() bool { return r.Failed == 0 }

// ExpectationError is a failing expectation with on_violation: fail. Before the commit
// (a row check) the table is unchanged; after it (a table check) Rollback says how to
// undo the commit.
type ExpectationError struct {
	Stage, Name, Table string
	Msg                string
	// AfterCommit: a table check failed; Committed: the stage had committed to the
	// table (Rollback then says how to undo it).
	AfterCommit, Committed bool
	Rollback               string
}

func (e *ExpectationError) Error() string {
	switch {
	case e.AfterCommit && e.Committed:
		return fmt.Sprintf("expectation %s failed on %s after the stage's commit: %s; the run is failed, the table keeps the commit: %s", e.Name, e.Table, e.Msg, e.Rollback)
	case e.AfterCommit:
		return fmt.Sprintf("expectation %s failed on %s, which the stage did not change: %s; the run is failed: fix the table (orchestrator table history shows who changed it) and run again", e.Name, e.Table, e.Msg)
	}
	return fmt.Sprintf("expectation %s failed: %s; nothing was committed, %s is unchanged", e.Name, e.Msg, e.Table)
}

// factKeyRead is the lookup key column a fact_load's drop or quarantine predicate reads
// ("" when none, or for another stage or action).
func factKeyRead(cfg Config, e *Expectation) string {
	c, ok := cfg.(*FactLoadConfig)
	if a := e.Action(); !ok || a != ActionDrop && a != ActionQuarantine {
		return ""
	}
	p, err := expr.Parse(e.Expect)
	if err != nil {
		return ""
	}
	for _, col := range expr.Columns(p) {
		for _, l := range c.Lookups {
			if strings.EqualFold(col, l.Key) {
				return col
			}
		}
	}
	return ""
}
