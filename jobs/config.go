package jobs

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// Kind names a stage kind as written in a pipeline's `kind:` field.
type Kind string

// The stage kinds.
const (
	KindIngest         Kind = "ingest"
	KindCaptureHistory Kind = "capture_history"
	KindSCD2Merge      Kind = "scd2_merge"
	KindSCD1Merge      Kind = "scd1_merge"
	KindVacuum         Kind = "vacuum"
	KindFactLoad       Kind = "fact_load"
)

// Kinds lists every stage kind, in documentation order.
var Kinds = []Kind{KindIngest, KindCaptureHistory, KindSCD2Merge, KindSCD1Merge, KindFactLoad, KindVacuum}

// FieldError is one problem in a stage config. Field is the YAML key path inside the
// stage (e.g. "csv.delimiter", "keys[1]"); the pipeline loader turns it into file:line:col.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }

// Config is a stage kind's configuration, as decoded from YAML.
type Config interface {
	// Kind names the stage kind the config belongs to.
	Kind() Kind
	// Validate reports every problem in the config itself (not ones that need other parts
	// of the pipeline, such as whether a table is declared: the loader checks those).
	Validate() []FieldError
	// Tables returns the declared table names the config reads and writes.
	Tables() (reads, writes []string)
}

// RowKeyed is a config whose stage writes its target by key: RowKeys names the columns
// that identify a row of table when it is the target (nil when the stage only appends,
// and for any other table it writes: a quarantine table, a fact load's dimension).
type RowKeyed interface {
	Config
	RowKeys(table string) []string
}

// ChangeMerge is the config of a merge that can read its source's change feed
// (scd1_merge, scd2_merge): EventLog is where it keeps its event log (EventLogPath).
type ChangeMerge interface {
	Config
	EventLog() string
}

// NewConfig returns an empty config for a kind, or false for an unknown kind.
func NewConfig(k Kind) (Config, bool) {
	switch k {
	case KindIngest:
		return &IngestConfig{}, true
	case KindCaptureHistory:
		return &CaptureHistoryConfig{}, true
	case KindSCD2Merge:
		return &SCD2Config{}, true
	case KindSCD1Merge:
		return &SCD1Config{}, true
	case KindVacuum:
		return &VacuumConfig{}, true
	case KindFactLoad:
		return &FactLoadConfig{}, true
	}
	return nil, false
}

// IngestConfig configures an ingest stage: new files under a glob (or one URL) loaded into
// a bronze table, exactly once per source file.
type IngestConfig struct {
	// Source is a glob of object keys relative to the warehouse (e.g. "landing/sales/*.csv",
	// "**" matches across directories) or an http(s) URL.
	Source string `yaml:"source"`
	// Format is csv, ndjson or parquet; default: from the source's extension.
	Format string `yaml:"format"`
	// Target is the declared table the rows go to.
	Target string `yaml:"target"`
	// Mode is append (default: every row is a new row), upsert (rows replace the target
	// row with the same Keys: a MERGE, so the table's change feed shows updates with pre
	// and post images; rows matching DeleteWhen delete it) or snapshot (the files of a
	// run are the table's whole content: keys they lack are deleted, changed rows
	// updated, new ones inserted, unchanged rows left alone, in one commit).
	Mode string   `yaml:"mode"`
	Keys []string `yaml:"keys"`
	// SequenceBy (upsert, snapshot) orders several rows of one key in a run: the last by
	// sequence wins, a delete wins a tie, exact duplicates are dropped. Without it a key
	// that occurs twice in a file is an error. In upsert mode a row older than the
	// target's row of its key changes nothing.
	SequenceBy string `yaml:"sequence_by"`
	// DeleteWhen is a predicate over the source row (e.g. "op = 'D'") marking deletes, for
	// modes upsert and snapshot; its column names always mean the source row.
	DeleteWhen string `yaml:"delete_when"`
	// AllowMissingColumns fills declared nullable columns that a CSV or Parquet file
	// lacks with NULL (the run's notes name them) instead of failing.
	AllowMissingColumns bool `yaml:"allow_missing_columns"`
	// CSV options, for format csv.
	CSV CSVOptions `yaml:"csv"`
	// SourceFileColumn and LoadTimestampColumn name the lineage columns added to every row
	// (defaults "source_file" and "load_timestamp"); the table must declare them.
	SourceFileColumn    string `yaml:"source_file_column"`
	LoadTimestampColumn string `yaml:"load_timestamp_column"`
	// OnError: fail (default), skip or quarantine.
	OnError string `yaml:"on_error"`
	// QuarantineTable receives bad records with their error text when on_error is quarantine.
	QuarantineTable string `yaml:"quarantine_table"`
	// BatchSize is the number of rows per Arrow batch (default 32768).
	BatchSize int `yaml:"batch_size"`
	// HTTP settings for a URL source.
	HTTP HTTPOptions `yaml:"http"`
	// MemoryBudget bounds the memory of an upsert or snapshot run (default: the
	// environment's, else DefaultMemoryBudget); a larger run works in passes over
	// spill files.
	MemoryBudget ByteSize `yaml:"memory_budget"`
	// SnapshotTime (mode snapshot) is the time the run's files show the table at: a
	// timestamp or a date (e.g. ${run.slot}), or file_name (the date in the files'
	// names). Default: with a timestamp or date sequence_by, its newest value in the
	// files; else none. Merges of the table's change feed date the snapshot's deletes
	// (and, without a sequence_by of their own, its rows) at this time.
	SnapshotTime string `yaml:"snapshot_time"`
	// SnapshotDate (mode snapshot) makes the run's files a backlog of dated full
	// extracts: each file is one snapshot, dated by its name or by a column of its rows
	// (files of one date form one snapshot), and the snapshots are loaded in date order,
	// one commit each, in one run. Not with SnapshotTime.
	SnapshotDate *SnapshotDate `yaml:"snapshot_date"`
	// MaxDeleteFraction (mode snapshot) is the largest share of the table's rows a run
	// may delete because its files lack their keys (default DefaultMaxDeleteFraction;
	// 1 allows any): more is refused before anything is written.
	MaxDeleteFraction *float64 `yaml:"max_delete_fraction"`
}

// SnapshotDate says where a snapshot ingest finds each file's date (snapshot_date).
type SnapshotDate struct {
	// From is file_name (the date in the file's path) or column (the value of Column,
	// the same in every row of a file).
	From string `yaml:"from"`
	// Pattern (from: file_name) is a regular expression searched in the file's path
	// whose first group is the date (2026-01-15, 20260115 or a timestamp); default: the
	// last YYYY-MM-DD or YYYYMMDD in the path.
	Pattern string `yaml:"pattern"`
	// Column (from: column) is a date or timestamp column of the table.
	Column string `yaml:"column"`
}

// CSVOptions describe a CSV dialect.
type CSVOptions struct {
	Header          *bool  `yaml:"header"`           // default true
	Delimiter       string `yaml:"delimiter"`        // default ","
	Quote           string `yaml:"quote"`            // default `"`
	NullString      string `yaml:"null_string"`      // default "" (an empty field is null)
	TimestampFormat string `yaml:"timestamp_format"` // Go layout; default RFC 3339 and common variants
	TimeZone        string `yaml:"timezone"`         // zone for timestamps without an offset; default UTC
}

// HTTPOptions configure a URL source.
type HTTPOptions struct {
	Timeout Duration          `yaml:"timeout"` // per request, default 60s
	Retries *int              `yaml:"retries"` // default 4
	Headers map[string]string `yaml:"headers"`
}

// Kind implements Config.
func (*IngestConfig) Kind() Kind { return KindIngest }

// Tables implements Config.
func (c *IngestConfig) Tables() (reads, writes []string) {
	writes = []string{c.Target}
	if c.QuarantineTable != "" {
		writes = append(writes, c.QuarantineTable)
	}
	return nil, writes
}

// RowKeys implements RowKeyed: an upsert's or snapshot's keys (none for an append).
func (c *IngestConfig) RowKeys(table string) []string { return targetKeys(table, c.Target, c.Keys) }

// targetKeys is keys when table is target, else nil.
func targetKeys(table, target string, keys []string) []string {
	if table != target {
		return nil
	}
	return keys
}

// Validate implements Config.
func (c *IngestConfig) Validate() []FieldError {
	var errs []FieldError
	add := func(f, format string, a ...any) { errs = append(errs, FieldError{f, fmt.Sprintf(format, a...)}) }
	switch {
	case c.Source == "":
		add("source", "required: a glob of object keys (e.g. landing/sales/*.csv) or an http(s) URL")
	case isURL(c.Source):
	default:
		if _, err := path.Match(c.Source, ""); err != nil {
			add("source", "bad glob %q: %v", c.Source, err)
		}
	}
	switch c.Format {
	case "", "csv", "ndjson", "parquet":
		if c.Format == "" && c.Source != "" && formatFromName(c.Source) == "" {
			add("format", "required: cannot tell the format from %q; expected csv, ndjson or parquet", c.Source)
		}
	default:
		add("format", "unknown format %q; expected csv, ndjson or parquet", c.Format)
	}
	if c.Target == "" {
		add("target", "required: the declared table to load into")
	}
	switch c.Mode {
	case "", "append":
		if len(c.Keys) > 0 {
			add("keys", "only used with mode: upsert or snapshot")
		}
		if c.DeleteWhen != "" {
			add("delete_when", "only used with mode: upsert or snapshot")
		}
		if c.SequenceBy != "" {
			add("sequence_by", "only used with mode: upsert or snapshot")
		}
	case "upsert", "snapshot":
		if len(c.Keys) == 0 {
			add("keys", "required with mode: %s: the columns that identify a row", c.Mode)
		}
	default:
		add("mode", "unknown mode %q; expected append, upsert or snapshot", c.Mode)
	}
	errs = append(errs, validateKeys(c.Keys)...)
	if e, ok := checkPredicate("delete_when", c.DeleteWhen); !ok {
		errs = append(errs, e)
	}
	if d := c.CSV.Delimiter; d != "" && (len(d) != 1 || d[0] >= 0x80) {
		add("csv.delimiter", "must be one ASCII character, got %q", d)
	}
	if q := c.CSV.Quote; q != "" && (len(q) != 1 || q[0] >= 0x80) {
		add("csv.quote", "must be one ASCII character, got %q", q)
	}
	if c.CSV.TimeZone != "" {
		if _, err := time.LoadLocation(c.CSV.TimeZone); err != nil {
			add("csv.timezone", "unknown time zone %q", c.CSV.TimeZone)
		}
	}
	switch c.OnError {
	case "", "fail", "skip":
		if c.QuarantineTable != "" {
			add("quarantine_table", "only used with on_error: quarantine")
		}
	case "quarantine":
		if c.QuarantineTable == "" {
			add("quarantine_table", "required with on_error: quarantine")
		}
	default:
		add("on_error", "unknown value %q; expected fail, skip or quarantine", c.OnError)
	}
	if c.BatchSize < 0 {
		add("batch_size", "must be positive, got %d", c.BatchSize)
	}
	if c.HTTP.Retries != nil && *c.HTTP.Retries < 0 {
		add("http.retries", "must be 0 or more, got %d", *c.HTTP.Retries)
	}
	if c.MemoryBudget != 0 && c.Mode != "upsert" && c.Mode != "snapshot" {
		add("memory_budget", "only used with mode: upsert or snapshot (an append streams)")
	}
	if c.SnapshotTime != "" {
		switch {
		case c.Mode != "snapshot":
			add("snapshot_time", "only used with mode: snapshot")
		case c.SnapshotTime == SnapshotTimeFromFileName, strings.Contains(c.SnapshotTime, "${"):
		default:
			if _, err := parseSnapshotTime(c.SnapshotTime); err != nil {
				add("snapshot_time", "%v", err)
			}
		}
	}
	if c.SnapshotDate != nil {
		errs = append(errs, c.validateSnapshotDate()...)
	}
	if c.MaxDeleteFraction != nil {
		errs = append(errs, validateDeleteFraction(*c.MaxDeleteFraction)...)
		if c.Mode != "snapshot" {
			add("max_delete_fraction", "only used with mode: snapshot")
		}
	}
	return append(errs, validateBudget(c.MemoryBudget)...)
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// formatFromName guesses a format from a file name or glob.
func formatFromName(name string) string {
	n := strings.ToLower(name)
	for _, suffix := range []string{".gz", ".zst"} {
		n = strings.TrimSuffix(n, suffix)
	}
	switch {
	case strings.HasSuffix(n, ".csv"), strings.HasSuffix(n, ".tsv"):
		return "csv"
	case strings.HasSuffix(n, ".ndjson"), strings.HasSuffix(n, ".jsonl"), strings.HasSuffix(n, ".json"):
		return "ndjson"
	case strings.HasSuffix(n, ".parquet"):
		return "parquet"
	}
	return ""
}

// CaptureHistoryConfig configures a capture_history stage: the source's change feed over
// (last captured version, latest version at stage start] appended to a history table.
type CaptureHistoryConfig struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
	// StartingVersion is the first source version to capture on the first run; default: the
	// version where the change feed was enabled.
	StartingVersion *int64 `yaml:"starting_version"`
	// IgnoreDeletes drops delete rows from the history (default false).
	IgnoreDeletes bool `yaml:"ignore_deletes"`
	// SchemaEvolution lets new nullable source columns be added to the history table.
	SchemaEvolution bool `yaml:"schema_evolution"`
}

// Kind implements Config.
func (*CaptureHistoryConfig) Kind() Kind { return KindCaptureHistory }

// Tables implements Config.
func (c *CaptureHistoryConfig) Tables() (reads, writes []string) {
	return []string{c.Source}, []string{c.Target}
}

// Validate implements Config.
func (c *CaptureHistoryConfig) Validate() []FieldError {
	var errs []FieldError
	if c.Source == "" {
		errs = append(errs, FieldError{"source", "required: the table whose change feed is captured"})
	}
	if c.Target == "" {
		errs = append(errs, FieldError{"target", "required: the history table to append to"})
	}
	if c.Source != "" && c.Source == c.Target {
		errs = append(errs, FieldError{"target", "must differ from source"})
	}
	if c.StartingVersion != nil && *c.StartingVersion < 0 {
		errs = append(errs, FieldError{"starting_version", fmt.Sprintf("must be 0 or more, got %d", *c.StartingVersion)})
	}
	return errs
}

// SCDColumns names the columns a type 2 dimension maintains.
type SCDColumns struct {
	SurrogateKey string `yaml:"surrogate_key"` // identity column; default none
	ValidFrom    string `yaml:"valid_from"`    // default "valid_from"
	ValidTo      string `yaml:"valid_to"`      // default "valid_to"
	IsCurrent    string `yaml:"is_current"`    // default "is_current"
	// Inferred is a boolean column that flags a fact_load's placeholder version of a
	// business key the dimension has not seen yet (missing: inferred); the merge fills
	// such a row in place with the key's first version and writes false there. Default
	// none.
	Inferred string `yaml:"inferred"`
}

// The default names of a type 2 dimension's columns.
const (
	DefaultValidFrom = "valid_from"
	DefaultValidTo   = "valid_to"
	DefaultIsCurrent = "is_current"
)

// WithDefaults returns the columns with every name left empty set to its default (the
// surrogate key has none).
func (c SCDColumns) WithDefaults() SCDColumns {
	if c.ValidFrom == "" {
		c.ValidFrom = DefaultValidFrom
	}
	if c.ValidTo == "" {
		c.ValidTo = DefaultValidTo
	}
	if c.IsCurrent == "" {
		c.IsCurrent = DefaultIsCurrent
	}
	return c
}

// SCD2Config configures an scd2_merge stage (see STAGES.md for the rules).
type SCD2Config struct {
	// Source is a declared table. With SourceChanges the stage reads its change feed since
	// the last merged version; otherwise it compares the source snapshot with current rows.
	Source        string   `yaml:"source"`
	SourceChanges bool     `yaml:"source_changes"`
	Target        string   `yaml:"target"`
	Keys          []string `yaml:"keys"`
	// Track lists the tracked (type 2) columns; TrackExcept lists the columns not tracked
	// (all other non-key columns are). At most one of the two; default: every non-key column.
	Track       []string `yaml:"track"`
	TrackExcept []string `yaml:"track_except"`
	// Type1 columns are overwritten in place on every version of the key, with no new version.
	Type1 []string `yaml:"type1"`
	// SequenceBy is a business timestamp or version column; default the source commit timestamp.
	SequenceBy string `yaml:"sequence_by"`
	// Deletes: ignore (default), close, or tombstone.
	Deletes string `yaml:"deletes"`
	// DeleteWhen is a predicate over the source row (e.g. "op = 'D'") marking deletes; for
	// a change feed source, delete rows are deletes too.
	DeleteWhen string `yaml:"delete_when"`
	// Where is a predicate over the source row: rows it does not hold for are not
	// merged (the run's notes count them), e.g. "customer_id IS NOT NULL" to pass rows
	// with a NULL key, which are otherwise refused.
	Where   string     `yaml:"where"`
	Columns SCDColumns `yaml:"columns"`
	// NewColumns says what a tracked column the dimension gained does: "version"
	// (default) opens a new version of each key at its first value, as any change does;
	// "fill" fills the open versions in place from the source's newest row of each key,
	// in one commit before the merge.
	NewColumns string `yaml:"new_columns"`
	// IgnoreNullUpdates makes a NULL in a change row mean "unchanged" for that column
	// (partial change rows): see scd2_options.go.
	IgnoreNullUpdates bool `yaml:"ignore_null_updates"`
	// OpenEnd is the valid_to of current versions: unset, 9999-12-31 00:00:00; null; or
	// a declared timestamp.
	OpenEnd SCDTime `yaml:"open_end"`
	// FirstValidFrom is the valid_from of a key's first version: unset or "sequence",
	// its sequence_by value; or a declared timestamp (e.g. 1900-01-01).
	FirstValidFrom SCDTime `yaml:"first_valid_from"`
	// MemoryBudget bounds the stage's memory (default: the environment's, else
	// DefaultMemoryBudget); a larger batch works in passes over spill files.
	MemoryBudget ByteSize `yaml:"memory_budget"`
	// QuarantineTable receives the source rows a row expectation with on_violation:
	// quarantine sets aside (a table with QuarantineColumns, as an ingest's).
	QuarantineTable string `yaml:"quarantine_table"`
}

// Kind implements Config.
func (*SCD2Config) Kind() Kind { return KindSCD2Merge }

// Tables implements Config.
func (c *SCD2Config) Tables() (reads, writes []string) {
	return []string{c.Source}, withQuarantine(c.Target, c.QuarantineTable)
}

// withQuarantine lists a stage's target and, when it has one, its quarantine table.
func withQuarantine(target, quarantine string) []string {
	if quarantine != "" {
		return []string{target, quarantine}
	}
	return []string{target}
}

// EventLog implements ChangeMerge.
func (c *SCD2Config) EventLog() string { return EventLogPath(KindSCD2Merge, c.Target, c.Source) }

// RowKeys implements RowKeyed: the surrogate key when there is one, else the keys and
// valid_from (one row per version of a key).
func (c *SCD2Config) RowKeys(table string) []string {
	if c.Columns.SurrogateKey != "" {
		return targetKeys(table, c.Target, []string{c.Columns.SurrogateKey})
	}
	return targetKeys(table, c.Target, append(slices.Clone(c.Keys), c.Columns.WithDefaults().ValidFrom))
}

// Validate implements Config.
func (c *SCD2Config) Validate() []FieldError {
	errs := validateMerge(c.Source, c.Target, c.Keys)
	add := func(f, format string, a ...any) { errs = append(errs, FieldError{f, fmt.Sprintf(format, a...)}) }
	if len(c.Track) > 0 && len(c.TrackExcept) > 0 {
		add("track_except", "use either track or track_except, not both")
	}
	keys := map[string]bool{}
	for _, k := range c.Keys {
		keys[strings.ToLower(k)] = true
	}
	tracked := map[string]bool{}
	for i, col := range c.Track {
		if keys[strings.ToLower(col)] {
			add(fmt.Sprintf("track[%d]", i), "%q is a key column; keys are never tracked", col)
		}
		tracked[strings.ToLower(col)] = true
	}
	for i, col := range c.Type1 {
		if keys[strings.ToLower(col)] {
			add(fmt.Sprintf("type1[%d]", i), "%q is a key column", col)
		}
		if tracked[strings.ToLower(col)] {
			add(fmt.Sprintf("type1[%d]", i), "%q is also in track; a column is either type 1 or tracked", col)
		}
	}
	switch c.Deletes {
	case "", "ignore", "close", "tombstone":
	default:
		add("deletes", "unknown value %q; expected ignore, close or tombstone", c.Deletes)
	}
	switch c.NewColumns {
	case "", "version", "fill":
	default:
		add("new_columns", "unknown value %q; expected version or fill", c.NewColumns)
	}
	for _, p := range [][2]string{{"delete_when", c.DeleteWhen}, {"where", c.Where}} {
		if e, ok := checkPredicate(p[0], p[1]); !ok {
			errs = append(errs, e)
		}
	}
	names := map[string]string{}
	for _, nc := range []struct{ field, name string }{
		{"columns.surrogate_key", c.Columns.SurrogateKey},
		{"columns.valid_from", c.Columns.ValidFrom},
		{"columns.valid_to", c.Columns.ValidTo},
		{"columns.is_current", c.Columns.IsCurrent},
		{"columns.inferred", c.Columns.Inferred},
	} {
		if nc.name == "" {
			continue
		}
		if prev, ok := names[strings.ToLower(nc.name)]; ok {
			add(nc.field, "%q is already used by %s", nc.name, prev)
		}
		names[strings.ToLower(nc.name)] = nc.field
	}
	errs = append(errs, c.validateOptions()...)
	return append(errs, validateBudget(c.MemoryBudget)...)
}

// SCD1Config configures an scd1_merge stage: an upsert by key with no history.
type SCD1Config struct {
	Source        string   `yaml:"source"`
	SourceChanges bool     `yaml:"source_changes"`
	Target        string   `yaml:"target"`
	Keys          []string `yaml:"keys"`
	SequenceBy    string   `yaml:"sequence_by"`
	// Deletes: ignore (default) or delete.
	Deletes string `yaml:"deletes"`
	// DeleteWhen is a predicate over the source row (e.g. "op = 'D'") marking deletes.
	DeleteWhen string `yaml:"delete_when"`
	// Where is a predicate over the source row: rows it does not hold for are not
	// merged (see SCD2Config.Where).
	Where string `yaml:"where"`
	// MemoryBudget bounds the stage's memory (see SCD2Config.MemoryBudget).
	MemoryBudget ByteSize `yaml:"memory_budget"`
	// QuarantineTable: see SCD2Config.QuarantineTable.
	QuarantineTable string `yaml:"quarantine_table"`
}

// Kind implements Config.
func (*SCD1Config) Kind() Kind { return KindSCD1Merge }

// Tables implements Config.
func (c *SCD1Config) Tables() (reads, writes []string) {
	return []string{c.Source}, withQuarantine(c.Target, c.QuarantineTable)
}

// RowKeys implements RowKeyed: the merge keys.
func (c *SCD1Config) RowKeys(table string) []string { return targetKeys(table, c.Target, c.Keys) }

// EventLog implements ChangeMerge.
func (c *SCD1Config) EventLog() string { return EventLogPath(KindSCD1Merge, c.Target, c.Source) }

// Validate implements Config.
func (c *SCD1Config) Validate() []FieldError {
	errs := validateMerge(c.Source, c.Target, c.Keys)
	switch c.Deletes {
	case "", "ignore", "delete":
	default:
		errs = append(errs, FieldError{"deletes", fmt.Sprintf("unknown value %q; expected ignore or delete", c.Deletes)})
	}
	for _, p := range [][2]string{{"delete_when", c.DeleteWhen}, {"where", c.Where}} {
		if e, ok := checkPredicate(p[0], p[1]); !ok {
			errs = append(errs, e)
		}
	}
	return append(errs, validateBudget(c.MemoryBudget)...)
}

// checkPredicate reports whether a predicate field (empty: unset) parses; a name written
// target.x is refused, since the predicate reads the source row.
func checkPredicate(field, pred string) (FieldError, bool) {
	if pred == "" {
		return FieldError{}, true
	}
	p, err := expr.Parse(pred)
	if err != nil {
		return FieldError{field, fmt.Sprintf("%q: %v", pred, err)}, false
	}
	for _, c := range expr.Columns(p) {
		if rest, ok := strings.CutPrefix(strings.ToLower(c), "target."); ok {
			return FieldError{field, fmt.Sprintf("%q names %s: the predicate reads the source row, so write %s", pred, c, rest)}, false
		}
		if rest, ok := strings.CutPrefix(strings.ToLower(c), "source."); ok {
			return FieldError{field, fmt.Sprintf("%q names %s: column names always mean the source row, so write %s", pred, c, rest)}, false
		}
	}
	return FieldError{}, true
}

func validateMerge(source, target string, keys []string) []FieldError {
	var errs []FieldError
	if source == "" {
		errs = append(errs, FieldError{"source", "required: the table to merge from"})
	}
	if target == "" {
		errs = append(errs, FieldError{"target", "required: the dimension table to merge into"})
	}
	if source != "" && source == target {
		errs = append(errs, FieldError{"target", "must differ from source"})
	}
	if len(keys) == 0 {
		errs = append(errs, FieldError{"keys", "required: at least one business key column"})
	}
	return append(errs, validateKeys(keys)...)
}

// validateKeys reports key columns listed twice.
func validateKeys(keys []string) []FieldError {
	var errs []FieldError
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[strings.ToLower(k)] {
			errs = append(errs, FieldError{fmt.Sprintf("keys[%d]", i), fmt.Sprintf("duplicate key column %q", k)})
		}
		seen[strings.ToLower(k)] = true
	}
	return errs
}

// VacuumConfig configures a vacuum stage.
type VacuumConfig struct {
	// Tables to vacuum (declared names).
	TableNames []string `yaml:"tables"`
	// Retain overrides the tables' delta.deletedFileRetentionDuration; shorter than the
	// table's setting is refused unless Force.
	Retain *Duration `yaml:"retain"`
	Force  bool      `yaml:"force"`
	DryRun bool      `yaml:"dry_run"`
	// LogCleanup also removes expired log files (default true).
	LogCleanup *bool `yaml:"log_cleanup"`
}

// Kind implements Config.
func (*VacuumConfig) Kind() Kind { return KindVacuum }

// Tables implements Config.
func (c *VacuumConfig) Tables() (reads, writes []string) { return nil, c.TableNames }

// Validate implements Config.
func (c *VacuumConfig) Validate() []FieldError {
	var errs []FieldError
	if len(c.TableNames) == 0 {
		errs = append(errs, FieldError{"tables", "required: at least one table to vacuum"})
	}
	if c.Retain != nil && *c.Retain < 0 {
		errs = append(errs, FieldError{"retain", "must not be negative"})
	}
	return errs
}

// Duration is a time.Duration written in YAML as "90s", "15m", "168h" or "7d".
type Duration time.Duration

// ParseDuration accepts Go durations plus a whole-day suffix "d".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err == nil && fmt.Sprint(days) == n {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: expected e.g. 90s, 15m, 168h or 7d", s)
	}
	return d, nil
}

// UnmarshalText implements encoding.TextUnmarshaler (used by YAML decoding).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// validateDeleteFraction checks a max_delete_fraction.
func validateDeleteFraction(f float64) []FieldError {
	if f < 0 || f > 1 || f != f {
		return []FieldError{{"max_delete_fraction", fmt.Sprintf("must be between 0 and 1 (a share of the table's rows), got %g", f)}}
	}
	return nil
}
