package jobs

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
)

// A backlog of dated full extracts (snapshot_date), as a snapshot ingest loads it.
//
// When several extracts wait (customers_2026-11-01.csv, customers_2026-11-02.csv, ...),
// each file is one snapshot, dated by its name (a declared pattern, else the last date
// in its path) or by a declared column, which every row of the file carries; files of
// one date form one snapshot. The run loads the snapshots in date order, each as a
// snapshot run does: its keys that the table lacks insert, changed rows update, the
// table's keys it lacks are deleted, in ONE commit per snapshot that records its files
// and its date (snapshotAsOfID). So the staging table's change feed shows each
// snapshot's changes as a version of their own, dated at the snapshot, and a merge of
// that feed (scd2_merge with source_changes) applies the whole backlog in date order in
// one run and one commit of the dimension: a key's attributes change at the snapshot
// where they change, a key missing from a snapshot closes at its date, a key returning
// opens a new version. (One commit per snapshot on the staging table is what keeps each
// day's changes: a change feed shows one change of a key per version.)
//
// Exactly once: a file is recorded as loaded in its snapshot's commit, so a crash or a
// rerun loads only the snapshots not committed yet. In time order: a waiting snapshot
// not newer than the last one the table holds is refused, naming its file and both
// dates, before anything is written; a snapshot's files arrive together. Every file is
// checked on its own: a 0-byte file is refused naming it, and a snapshot (a header-only
// file) that lacks more of the table than max_delete_fraction allows is refused naming
// its file, its earlier snapshots committed.

// The values of snapshot_date.from.
const (
	SnapshotDateFromFileName = "file_name"
	SnapshotDateFromColumn   = "column"
)

// validateSnapshotDate checks snapshot_date.
func (c *IngestConfig) validateSnapshotDate() []FieldError {
	var errs []FieldError
	add := func(f, format string, a ...any) { errs = append(errs, FieldError{f, fmt.Sprintf(format, a...)}) }
	d := c.SnapshotDate
	if c.Mode != "snapshot" {
		add("snapshot_date", "only used with mode: snapshot")
	}
	if c.SnapshotTime != "" {
		add("snapshot_date", "use either snapshot_time (one extract per run) or snapshot_date (a backlog of dated extracts), not both")
	}
	switch d.From {
	case SnapshotDateFromFileName:
		if d.Column != "" {
			add("snapshot_date.column", "only used with from: column")
		}
		if d.Pattern != "" {
			if re, err := regexp.Compile(d.Pattern); err != nil {
				add("snapshot_date.pattern", "bad regular expression %q: %v", d.Pattern, err)
			} else if re.NumSubexp() < 1 {
				add("snapshot_date.pattern", "%q has no group: put the date in parentheses, e.g. 'customers_(\\d{4}-\\d{2}-\\d{2})\\.csv'", d.Pattern)
			}
		}
	case SnapshotDateFromColumn:
		if d.Column == "" {
			add("snapshot_date.column", "required with from: column: the date or timestamp column that dates each file's rows")
		}
		if d.Pattern != "" {
			add("snapshot_date.pattern", "only used with from: file_name")
		}
	case "":
		add("snapshot_date.from", "required: file_name (the date in each file's name) or column (a date column of its rows)")
	default:
		add("snapshot_date.from", "unknown value %q; expected file_name or column", d.From)
	}
	return errs
}

// loadBacklog loads the waiting files (not loaded before) as dated snapshots, in date
// order, one commit each (see above).
func (s *Ingest) loadBacklog(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, res *Result) error {
	at := make(map[*sourceFile]int64, len(files))
	for _, f := range files {
		d, err := s.fileDate(ctx, snap, f)
		if err != nil {
			return err
		}
		f.dated, at[f] = d, d.at
	}
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b *sourceFile) int {
		if at[a] != at[b] {
			if at[a] < at[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if last, ok := snap.TxnVersion(snapshotAsOfID); ok && at[files[0]] <= last {
		f := files[0]
		why := "older than"
		if at[f] == last {
			why = "as of the same time as"
		}
		return fmt.Errorf("%s: this snapshot is as of %s, %s the last snapshot %s holds (as of %s); nothing was loaded. Snapshots load in date order, and a snapshot's files arrive together: remove the file (or move it out of %s) and run again",
			f.Name, snapshotDateText(at[f]), why, decl.Name, snapshotDateText(last), s.cfg.Source)
	}
	var dates []string
	for i := 0; i < len(files); {
		j := i + 1
		for j < len(files) && at[files[j]] == at[files[i]] {
			j++
		}
		group := files[i:j]
		d := at[files[i]]
		if err := s.loadSnapshot(ctx, env, decl, tbl, group, loadTime, res); err != nil {
			if len(dates) > 0 {
				return fmt.Errorf("snapshot as of %s: %w (the snapshots before it are loaded: %s)", snapshotDateText(d), err, strings.Join(dates, ", "))
			}
			return err
		}
		dates = append(dates, snapshotDateText(d))
		i = j
	}
	if len(dates) > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d snapshots loaded in date order, one commit each: %s", len(dates), strings.Join(dates, ", ")))
	}
	return nil
}

// snapshotDateText shows a snapshot date: a date when it is midnight UTC, else a timestamp.
func snapshotDateText(at int64) string {
	t := time.UnixMicro(at).UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}

// datedFile is the snapshot a waiting file of a backlog belongs to: its date
// (microseconds since the epoch) and, dated by a column of its rows, that column and
// the line of the first row, which carries the date.
type datedFile struct {
	at     int64
	column string
	line   int64
}

// fileDate dates a waiting file.
func (s *Ingest) fileDate(ctx context.Context, snap *delta.Snapshot, f *sourceFile) (*datedFile, error) {
	d := s.cfg.SnapshotDate
	if d.From == SnapshotDateFromColumn {
		return s.columnDate(ctx, snap, f, d.Column)
	}
	if d.Pattern == "" {
		t, err := dateInFileName(f.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: no date (YYYY-MM-DD or YYYYMMDD) in its name, which snapshot_date: {from: file_name} needs; declare a pattern whose first group is the date", f.Name)
		}
		return &datedFile{at: t.UnixMicro()}, nil
	}
	re, err := regexp.Compile(d.Pattern)
	if err != nil {
		return nil, fmt.Errorf("snapshot_date.pattern %q: %w", d.Pattern, err)
	}
	m := re.FindStringSubmatch(f.Name)
	if m == nil {
		return nil, fmt.Errorf("%s: its name does not match snapshot_date.pattern %q, so it has no snapshot date; nothing was loaded. Remove the file or widen the pattern (or the source glob)", f.Name, d.Pattern)
	}
	t, err := parseNameDate(m[1])
	if err != nil {
		return nil, fmt.Errorf("%s: %q, the first group of snapshot_date.pattern %q in its name, is no date: %v", f.Name, m[1], d.Pattern, err)
	}
	return &datedFile{at: t.UnixMicro()}, nil
}

// parseNameDate reads a date taken from a file name: 2026-01-15, 20260115, or a
// timestamp as snapshot_time takes it.
func parseNameDate(v string) (time.Time, error) {
	if t, err := time.Parse("20060102", v); err == nil {
		return t, nil
	}
	return parseSnapshotTime(v)
}

// columnDate dates a file by column col of its first row (its first record only is
// decoded here; the load checks that every row carries that date). Rows that are bad
// records are left to the load, which on_error decides.
func (s *Ingest) columnDate(ctx context.Context, snap *delta.Snapshot, f *sourceFile, col string) (*datedFile, error) {
	format := s.format(f.Name)
	r, done, err := openSourceFile(ctx, f, format)
	if err != nil {
		return nil, err
	}
	defer done()
	opts, _, err := s.decodeOptions(snap.Schema(), format, decodeExtras{lines: true}, func(*decode.Error) {})
	if err != nil {
		return nil, err
	}
	opts.AddedLater = addedAfter(snap.Schema(), f.Version)
	rd, err := decode.NewReader(ctx, r, f.Name, opts)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	for rd.Next() {
		rec := rd.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		ci, li := rec.Schema().FieldIndices(col), rec.Schema().FieldIndices(lineColumn)
		if len(ci) != 1 || len(li) != 1 {
			return nil, fmt.Errorf("%s: no column %s, which snapshot_date: {from: column} dates the file by", f.Name, col)
		}
		line, _ := seqValue(rec.Column(li[0]), 0)
		v, err := rowDateAt(f, rec.Column(ci[0]), 0, col, line)
		if err != nil {
			return nil, err
		}
		return &datedFile{at: v, column: col, line: line}, nil
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no rows, so no snapshot date in column %s (snapshot_date: {from: column}); nothing was loaded. A header-only extract cannot be dated by its rows: remove it, or date the extracts by their names", f.Name, col)
}

// rowDateAt is the date in row i of dates (column col), at line of file f.
func rowDateAt(f *sourceFile, dates arrow.Array, i int, col string, line int64) (int64, error) {
	v, ok := seqValue(dates, i)
	switch {
	case !ok && dates.IsNull(i):
		return 0, fmt.Errorf("%s line %d: column %s is NULL; every row of an extract carries its snapshot's date (snapshot_date: {from: column})", f.Name, line, col)
	case !ok:
		return 0, fmt.Errorf("%s: column %s is %s; snapshot_date needs a date or timestamp column", f.Name, col, dates.DataType())
	}
	return v, nil
}

// check refuses a decoded record of a file dated by a column (d; nil: not) whose rows
// carry another date than the file's first row, or none: a file is one snapshot.
func (d *datedFile) check(f *sourceFile, rec arrow.RecordBatch) error {
	if d == nil || d.column == "" {
		return nil
	}
	ci, li := rec.Schema().FieldIndices(d.column), rec.Schema().FieldIndices(lineColumn)
	if len(ci) != 1 {
		return fmt.Errorf("%s: no column %s, which snapshot_date: {from: column} dates the file by", f.Name, d.column)
	}
	dates := rec.Column(ci[0])
	for i := range int(rec.NumRows()) {
		var line int64
		if len(li) == 1 {
			line, _ = seqValue(rec.Column(li[0]), i)
		}
		v, err := rowDateAt(f, dates, i, d.column, line)
		if err != nil {
			return err
		}
		if v != d.at {
			return fmt.Errorf("%s: line %d is as of %s, line %d as of %s (column %s); a file is one snapshot, all its rows of one date: deliver one file per date",
				f.Name, d.line, snapshotDateText(d.at), line, snapshotDateText(v), d.column)
		}
	}
	return nil
}
