package pipelines

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs"
)

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func sortStrings(s []string) { sort.Strings(s) }

// checkStageTables checks that the tables a stage names are declared and fit the stage.
func checkStageTables(ps, ws *problems, spec *Spec, sn *yaml.Node, st *Stage) {
	c := &stageCheck{ps: ps, ws: ws, spec: spec, sn: sn, st: st}
	switch cfg := st.Config.(type) {
	case *jobs.IngestConfig:
		c.ingest(cfg)
	case *jobs.CaptureHistoryConfig:
		src := c.table("source", cfg.Source)
		dst := c.table("target", cfg.Target)
		if src != nil && !src.ChangeDataFeed() {
			c.noChangeFeed("source", src)
		}
		for _, col := range []string{delta.ChangeTypeColumn, delta.CommitVersionColumn, delta.CommitTimestampColumn} {
			c.needColumn("target", dst, col, "")
		}
	case *jobs.SCD2Config:
		c.scd2(cfg)
	case *jobs.FactLoadConfig:
		c.factLoad(cfg)
	case *jobs.SCD1Config:
		src := c.table("source", cfg.Source)
		dst := c.table("target", cfg.Target)
		c.quarantineTable(cfg.QuarantineTable)
		for i, k := range cfg.Keys {
			c.needColumn(fmt.Sprintf("keys[%d]", i), src, k, "")
			c.needColumn(fmt.Sprintf("keys[%d]", i), dst, k, "")
		}
		c.needSequence("sequence_by", src, cfg.SequenceBy, true)
		c.needPredicateColumns("delete_when", src, cfg.DeleteWhen)
		c.needPredicateColumns("where", src, cfg.Where)
		c.nullableKeys(src, cfg.Keys, cfg.Where)
	case *jobs.VacuumConfig:
		for i, name := range cfg.TableNames {
			c.table(fmt.Sprintf("tables[%d]", i), name)
		}
	}
}

// stageCheck reports the problems of one stage's tables, each at the stage's key that
// names the table or column.
type stageCheck struct {
	ps   *problems
	ws   *problems // warnings
	spec *Spec
	sn   *yaml.Node
	st   *Stage
}

func (c *stageCheck) ingest(cfg *jobs.IngestConfig) {
	t := c.table("target", cfg.Target)
	c.quarantineTable(cfg.QuarantineTable)
	c.needColumn("source_file_column", t, or(cfg.SourceFileColumn, "source_file"), "string")
	c.needColumn("load_timestamp_column", t, or(cfg.LoadTimestampColumn, "load_timestamp"), "timestamp")
	for i, k := range cfg.Keys {
		c.needColumn(fmt.Sprintf("keys[%d]", i), t, k, "")
	}
	c.needSequence("sequence_by", t, cfg.SequenceBy, true)
	if d := cfg.SnapshotDate; d != nil && d.From == jobs.SnapshotDateFromColumn {
		c.needSequence("snapshot_date.column", t, d.Column, false)
	}
}

// quarantineTable checks a quarantine table's columns (jobs.QuarantineColumns).
func (c *stageCheck) quarantineTable(name string) {
	if q := c.table("quarantine_table", name); q != nil {
		for _, col := range jobs.QuarantineColumns {
			want := "string"
			switch col {
			case "line":
				want = "bigint"
			case "load_timestamp":
				want = "timestamp"
			}
			c.needColumn("quarantine_table", q, col, want)
		}
	}
}

func (c *stageCheck) scd2(cfg *jobs.SCD2Config) {
	src := c.table("source", cfg.Source)
	dst := c.table("target", cfg.Target)
	c.quarantineTable(cfg.QuarantineTable)
	if cfg.SourceChanges && src != nil && !src.ChangeDataFeed() {
		c.noChangeFeed("source_changes", src)
	}
	for i, k := range cfg.Keys {
		c.needColumn(fmt.Sprintf("keys[%d]", i), src, k, "")
		c.needColumn(fmt.Sprintf("keys[%d]", i), dst, k, "")
	}
	for i, k := range cfg.Track {
		c.needColumn(fmt.Sprintf("track[%d]", i), src, k, "")
	}
	for i, k := range cfg.Type1 {
		c.needColumn(fmt.Sprintf("type1[%d]", i), src, k, "")
	}
	c.needSequence("sequence_by", src, cfg.SequenceBy, false)
	c.needPredicateColumns("delete_when", src, cfg.DeleteWhen)
	c.needPredicateColumns("where", src, cfg.Where)
	c.nullableKeys(src, cfg.Keys, cfg.Where)
	if !cfg.SourceChanges {
		c.backlogSource(cfg.Source)
	}
	if cfg.SequenceBy != "" {
		c.undatedSnapshotSource(cfg)
	}

	cols := cfg.Columns.WithDefaults()
	c.needColumn("columns.valid_from", dst, cols.ValidFrom, "timestamp")
	c.needColumn("columns.valid_to", dst, cols.ValidTo, "timestamp")
	c.needColumn("columns.is_current", dst, cols.IsCurrent, "boolean")
	c.needColumn("columns.surrogate_key", dst, cfg.Columns.SurrogateKey, "bigint")
	c.needColumn("columns.inferred", dst, cfg.Columns.Inferred, "boolean")
	c.scd2Options(cfg, dst)
}

// backlogSource refuses an scd2_merge that reads the snapshot of a table a backlog of
// dated extracts loads (an ingest with snapshot_date): that ingest commits each extract
// on its own, and a merge of the table's snapshot would see only the newest one, so the
// days before it would be missing from the dimension's history.
func (c *stageCheck) backlogSource(source string) {
	for _, st := range c.spec.Stages {
		in, ok := st.Config.(*jobs.IngestConfig)
		if !ok || in.SnapshotDate == nil || in.Target != source {
			continue
		}
		c.ps.at(lookup(c.sn, "source"), "stage %s: source %s is loaded by stage %s with snapshot_date, one commit per dated extract; set source_changes: true to merge every extract in date order (a merge of its snapshot would see only the newest extract of a run)",
			c.st.Name, source, st.Name)
		return
	}
}

// undatedSnapshotSource warns about an scd2_merge that orders by its sequence_by (a
// business time) a table that a snapshot ingest loads with no time of its own (no
// sequence_by, snapshot_time or snapshot_date): that ingest dates each extract at the
// load's wall-clock time, so a key an extract lacks is closed at the time it was loaded,
// not at the extract's time (loading a week of extracts in an afternoon puts every
// close in that afternoon).
func (c *stageCheck) undatedSnapshotSource(cfg *jobs.SCD2Config) {
	for _, st := range c.spec.Stages {
		in, ok := st.Config.(*jobs.IngestConfig)
		if !ok || in.Mode != "snapshot" || in.Target != cfg.Source || in.SequenceBy != "" || in.SnapshotTime != "" || in.SnapshotDate != nil {
			continue
		}
		c.ws.at(lookup(c.sn, "sequence_by"), "warning: stage %s: versions start at their %s, but stage %s loads %s as snapshots with no time of their own (no sequence_by, snapshot_time or snapshot_date): a key an extract lacks is closed at the time the extract was loaded; date the extracts on %s with snapshot_time (file_name, or ${run.slot}) or sequence_by",
			c.st.Name, cfg.SequenceBy, st.Name, cfg.Source, st.Name)
		return
	}
}

// nullableKeys warns about merge keys that the source declares nullable, unless the
// stage has a where: a row without a key stops the merge (it is refused, naming it).
func (c *stageCheck) nullableKeys(src *jobs.Table, keys []string, where string) {
	if src == nil || src.Schema == nil || where != "" {
		return
	}
	for i, k := range keys {
		if f := src.Schema.Field(k); f != nil && f.Nullable {
			c.ws.at(lookup(c.sn, fmt.Sprintf("keys[%d]", i)), "warning: stage %s: key %s is nullable in source %s: a row without it will stop this merge; declare it nullable: false there (its ingest then fails on, skips or quarantines such rows), or set where: \"%s IS NOT NULL\" on the stage",
				c.st.Name, k, src.Name, k)
		}
	}
}

// table returns the declared table name (nil for ""), reporting an undeclared one.
func (c *stageCheck) table(field, name string) *jobs.Table {
	if name == "" {
		return nil
	}
	t := c.spec.Table(name)
	if t == nil {
		c.ps.at(lookup(c.sn, field), "stage %s: %s: table %q is not declared under tables", c.st.Name, field, name)
	}
	return t
}

func (c *stageCheck) noChangeFeed(field string, src *jobs.Table) {
	c.ps.at(lookup(c.sn, field), "stage %s: source table %s has no change feed; set %s: true in its properties", c.st.Name, src.Name, delta.PropEnableChangeDataFeed)
}

// needColumn checks that table t (when declared with a schema) has column col, of type
// want unless want is "".
func (c *stageCheck) needColumn(field string, t *jobs.Table, col string, want string) {
	if t == nil || t.Schema == nil || col == "" {
		return
	}
	f := t.Schema.Field(col)
	if f == nil {
		c.ps.at(lookup(c.sn, field), "stage %s: %s: table %s has no column %q", c.st.Name, field, t.Name, col)
		return
	}
	if want != "" && !typeIs(f.Type, want) {
		c.ps.at(lookup(c.sn, field), "stage %s: %s: column %s.%s is %s, expected %s", c.st.Name, field, t.Name, col, f.Type, want)
	}
}

// needSequence checks a sequence_by column: a timestamp or date (or an integer, when
// intOK: it is not a valid_from).
func (c *stageCheck) needSequence(field string, t *jobs.Table, col string, intOK bool) {
	if t == nil || t.Schema == nil || col == "" {
		return
	}
	f := t.Schema.Field(col)
	if f == nil {
		c.ps.at(lookup(c.sn, field), "stage %s: %s: table %s has no column %q", c.st.Name, field, t.Name, col)
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
		c.ps.at(lookup(c.sn, field), "stage %s: %s: column %s.%s is %s, expected %s", c.st.Name, field, t.Name, col, f.Type, want)
	}
}

// needPredicateColumns checks that a predicate over the source row names its columns.
func (c *stageCheck) needPredicateColumns(field string, t *jobs.Table, pred string) {
	if t == nil || t.Schema == nil || pred == "" {
		return
	}
	p, err := expr.Parse(pred)
	if err != nil {
		return // the stage config reports it
	}
	for _, col := range expr.Columns(p) {
		if lc := strings.ToLower(col); strings.HasPrefix(lc, "target.") || strings.HasPrefix(lc, "source.") {
			continue // the stage config reports it
		}
		if t.Schema.Field(col) == nil {
			c.ps.at(lookup(c.sn, field), "stage %s: %s: the source table %s has no column %q (the predicate reads the source row)", c.st.Name, field, t.Name, col)
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
