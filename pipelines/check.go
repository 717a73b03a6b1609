package pipelines

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func sortStrings(s []string) { sort.Strings(s) }

// checkStageTables checks that the tables a stage names are declared and fit the stage.
func checkStageTables(ps *problems, spec *Spec, sn *yaml.Node, st *Stage) {
	table := func(field, name string) *jobs.Table {
		if name == "" {
			return nil
		}
		t := spec.Table(name)
		if t == nil {
			ps.at(lookup(sn, field), "stage %s: %s: table %q is not declared under tables", st.Name, field, name)
		}
		return t
	}
	needColumn := func(field string, t *jobs.Table, col string, want string) {
		if t == nil || t.Schema == nil || col == "" {
			return
		}
		f := t.Schema.Field(col)
		if f == nil {
			ps.at(lookup(sn, field), "stage %s: %s: table %s has no column %q", st.Name, field, t.Name, col)
			return
		}
		if want != "" && !typeIs(f.Type, want) {
			ps.at(lookup(sn, field), "stage %s: %s: column %s.%s is %s, expected %s", st.Name, field, t.Name, col, f.Type, want)
		}
	}
	// needSequence checks a sequence_by column: a timestamp or date (or an integer, when
	// intOK: it is not a valid_from).
	needSequence := func(field string, t *jobs.Table, col string, intOK bool) {
		if t == nil || t.Schema == nil || col == "" {
			return
		}
		f := t.Schema.Field(col)
		if f == nil {
			ps.at(lookup(sn, field), "stage %s: %s: table %s has no column %q", st.Name, field, t.Name, col)
			return
		}
		ok, want := false, "timestamp, timestamp_ntz or date (it becomes valid_from)"
		for _, ty := range []string{"timestamp", "timestamp_ntz", "date"} {
			ok = ok || typeIs(f.Type, ty)
		}
		if intOK {
			want = "timestamp, timestamp_ntz, date, bigint, int, smallint or tinyint"
			for _, ty := range []string{"bigint", "int", "smallint", "tinyint"} {
				ok = ok || typeIs(f.Type, ty)
			}
		}
		if !ok {
			ps.at(lookup(sn, field), "stage %s: %s: column %s.%s is %s, expected %s", st.Name, field, t.Name, col, f.Type, want)
		}
	}
	// needPredicateColumns checks that a predicate over the source row names its columns.
	needPredicateColumns := func(field string, t *jobs.Table, pred string) {
		if t == nil || t.Schema == nil || pred == "" {
			return
		}
		p, err := delta.ParsePredicate(pred)
		if err != nil {
			return // the stage config reports it
		}
		for _, col := range delta.PredicateColumns(p) {
			if lc := strings.ToLower(col); strings.HasPrefix(lc, "target.") || strings.HasPrefix(lc, "source.") {
				continue // the stage config reports it
			}
			if t.Schema.Field(col) == nil {
				ps.at(lookup(sn, field), "stage %s: %s: the source table %s has no column %q (the predicate reads the source row)", st.Name, field, t.Name, col)
			}
		}
	}
	switch c := st.Config.(type) {
	case *jobs.IngestConfig:
		t := table("target", c.Target)
		if q := table("quarantine_table", c.QuarantineTable); q != nil {
			for _, col := range jobs.QuarantineColumns {
				want := "string"
				switch col {
				case "line":
					want = "bigint"
				case "load_timestamp":
					want = "timestamp"
				}
				needColumn("quarantine_table", q, col, want)
			}
		}
		needColumn("source_file_column", t, or(c.SourceFileColumn, "source_file"), "string")
		needColumn("load_timestamp_column", t, or(c.LoadTimestampColumn, "load_timestamp"), "timestamp")
		for i, k := range c.Keys {
			needColumn(fmt.Sprintf("keys[%d]", i), t, k, "")
		}
		needSequence("sequence_by", t, c.SequenceBy, true)
	case *jobs.CaptureHistoryConfig:
		src := table("source", c.Source)
		dst := table("target", c.Target)
		if src != nil && !src.ChangeDataFeed() {
			ps.at(lookup(sn, "source"), "stage %s: source table %s has no change feed; set %s: true in its properties", st.Name, src.Name, delta.PropEnableChangeDataFeed)
		}
		for _, col := range []string{delta.ChangeTypeColumn, delta.CommitVersionColumn, delta.CommitTimestampColumn} {
			needColumn("target", dst, col, "")
		}
	case *jobs.SCD2Config:
		src := table("source", c.Source)
		dst := table("target", c.Target)
		if c.SourceChanges && src != nil && !src.ChangeDataFeed() {
			ps.at(lookup(sn, "source_changes"), "stage %s: source table %s has no change feed; set %s: true in its properties", st.Name, src.Name, delta.PropEnableChangeDataFeed)
		}
		for i, k := range c.Keys {
			needColumn(fmt.Sprintf("keys[%d]", i), src, k, "")
			needColumn(fmt.Sprintf("keys[%d]", i), dst, k, "")
		}
		for i, k := range c.Track {
			needColumn(fmt.Sprintf("track[%d]", i), src, k, "")
		}
		for i, k := range c.Type1 {
			needColumn(fmt.Sprintf("type1[%d]", i), src, k, "")
		}
		needSequence("sequence_by", src, c.SequenceBy, false)
		needPredicateColumns("delete_when", src, c.DeleteWhen)

		needColumn("columns.valid_from", dst, or(c.Columns.ValidFrom, "valid_from"), "timestamp")
		needColumn("columns.valid_to", dst, or(c.Columns.ValidTo, "valid_to"), "timestamp")
		needColumn("columns.is_current", dst, or(c.Columns.IsCurrent, "is_current"), "boolean")
		needColumn("columns.surrogate_key", dst, c.Columns.SurrogateKey, "bigint")
	case *jobs.SCD1Config:
		src := table("source", c.Source)
		dst := table("target", c.Target)
		for i, k := range c.Keys {
			needColumn(fmt.Sprintf("keys[%d]", i), src, k, "")
			needColumn(fmt.Sprintf("keys[%d]", i), dst, k, "")
		}
		needSequence("sequence_by", src, c.SequenceBy, true)
		needPredicateColumns("delete_when", src, c.DeleteWhen)
	case *jobs.VacuumConfig:
		for i, name := range c.TableNames {
			table(fmt.Sprintf("tables[%d]", i), name)
		}
	}
}

// typeIs compares a column type with a pipeline type name.
func typeIs(t delta.DataType, want string) bool {
	w, err := delta.ParsePrimitive(want)
	if err != nil {
		return false
	}
	return strings.EqualFold(t.String(), w.String())
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
