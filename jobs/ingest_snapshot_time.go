package jobs

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// A snapshot load's time, and what a snapshot may delete.
//
// A snapshot run shows the table as of one time: its declared snapshot_time (a timestamp
// or date such as ${run.slot}, or the date in its files' names), else with sequence_by
// (a timestamp or date) the newest sequence_by value of its rows. The run's commit
// records it as a txn (snapshotAsOfID, version: microseconds since the epoch), so that
// a merge of the table's change feed dates the deletes of that commit (its keys missing
// from the extract) at the time its versions start, not at the load's wall-clock time,
// and without sequence_by dates the commit's rows there too. Snapshots load in time
// order: one older than the last one loaded is refused (its differences would not be
// what changed). A snapshot with neither records no time: merges then use the commit's.

// snapshotAsOfID is the txn appId under which a snapshot load records its time.
const snapshotAsOfID = "snapshot:as_of"

// DefaultMaxDeleteFraction is the largest share of a table's rows a snapshot run may
// delete by lacking their keys, unless the stage sets max_delete_fraction.
const DefaultMaxDeleteFraction = 0.5

// SnapshotTimeFromFileName is the snapshot_time that takes the date in the files' names.
const SnapshotTimeFromFileName = "file_name"

// fileNameDate finds a date in a file name: 2026-01-15 or 20260115.
var fileNameDate = regexp.MustCompile(`(?:^|[^0-9])((\d{4})-(\d{2})-(\d{2})|(\d{4})(\d{2})(\d{2}))(?:[^0-9]|$)`)

// parseSnapshotTime reads a declared snapshot time: RFC 3339 (an offset or Z), a
// timestamp without an offset (UTC) or a date (midnight UTC).
func parseSnapshotTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is no timestamp or date (expected e.g. 2026-01-15, 2026-01-15T02:00:00Z, ${run.slot} or %s)", v, SnapshotTimeFromFileName)
}

// dateInFileName returns the date in a file's name: the last one in its path below the
// source's directory (extracts/2026-01-15/accounts.csv, accounts_20260115.csv).
func dateInFileName(name string) (time.Time, error) {
	all := fileNameDate.FindAllStringSubmatch(name, -1)
	if all == nil {
		return time.Time{}, fmt.Errorf("file %s: no date (YYYY-MM-DD or YYYYMMDD) in its name, which snapshot_time: %s needs", name, SnapshotTimeFromFileName)
	}
	m := all[len(all)-1]
	text := m[1]
	if m[5] != "" {
		text = m[5] + "-" + m[6] + "-" + m[7]
	}
	t, err := time.Parse(time.DateOnly, text)
	if err != nil {
		return time.Time{}, fmt.Errorf("file %s: %q in its name is no date", name, m[1])
	}
	return t, nil
}

// snapshotTime is the time of a snapshot run of files (nil: none), checked against the
// time the table's last snapshot recorded: top is the newest sequence_by value of its
// rows (hasTop: there is one). See above.
func (s *Ingest) snapshotTime(snap *delta.Snapshot, files []*sourceFile, top int64, hasTop bool) (*int64, error) {
	var at int64
	switch decl := s.cfg.SnapshotTime; {
	case len(files) > 0 && files[0].dated != nil: // a backlog's snapshot (snapshot_date)
		at = files[0].dated.at
	case decl == SnapshotTimeFromFileName:
		var first time.Time
		for i, f := range files {
			t, err := dateInFileName(f.Name)
			if err != nil {
				return nil, err
			}
			if i > 0 && !t.Equal(first) {
				return nil, fmt.Errorf("the files of one snapshot name different dates: %s (%s) and %s (%s); deliver one extract per run, or declare snapshot_date: {from: file_name} instead of snapshot_time to load them as a backlog, oldest first",
					files[0].Name, first.Format(time.DateOnly), f.Name, t.Format(time.DateOnly))
			}
			first = t
		}
		at = first.UnixMicro()
	case decl != "":
		t, err := parseSnapshotTime(decl)
		if err != nil {
			return nil, fmt.Errorf("snapshot_time: %w", err)
		}
		at = t.UnixMicro()
	case hasTop && s.timeSequence(snap):
		at = top
	default:
		return nil, nil
	}
	if last, ok := snap.TxnVersion(snapshotAsOfID); ok && at < last {
		return nil, fmt.Errorf("%s: this snapshot is as of %s, older than the one the table holds (as of %s): load extracts in time order (a snapshot's differences from a newer one are not what changed)",
			strings.Join(fileNames(files), ", "), timestampText(at), timestampText(last))
	}
	return &at, nil
}

// timeSequence reports whether the stage's sequence_by is a timestamp or a date.
func (s *Ingest) timeSequence(snap *delta.Snapshot) bool {
	f := snap.Schema().Field(s.cfg.SequenceBy)
	return f != nil && isSequenceType(f.Type, false)
}

// setSnapshotTxns records files as loaded, and the snapshot's time when set, in tx.
func setSnapshotTxns(tx *delta.Transaction, files []*sourceFile, asOf *int64) {
	for _, f := range files {
		tx.SetTxn(f.ID, f.Version)
	}
	if asOf != nil {
		tx.SetTxn(snapshotAsOfID, *asOf)
	}
}

// checkDeleteShare refuses a snapshot of files that lacks more of the table's keys
// (absent, of tableKeys) than max_delete_fraction allows: an extract cut short, or the
// wrong one, would otherwise empty the table.
func (s *Ingest) checkDeleteShare(decl *Table, files []*sourceFile, absent, tableKeys int64) error {
	limit := DefaultMaxDeleteFraction
	if s.cfg.MaxDeleteFraction != nil {
		limit = *s.cfg.MaxDeleteFraction
	}
	if absent == 0 || float64(absent) <= limit*float64(tableKeys) {
		return nil
	}
	return fmt.Errorf("%s: this snapshot lacks %s of the %s rows of %s (%.0f%%), more than max_delete_fraction (%g) lets a run delete; nothing was written. "+
		"If the extract is complete, set max_delete_fraction: 1 on the stage for this run",
		strings.Join(fileNames(files), ", "), thousands(absent), thousands(tableKeys), decl.Name, 100*float64(absent)/float64(tableKeys), limit)
}

// checkDated refuses a snapshot that deletes keys without a time to date it by: its
// time comes from its rows' sequence_by (no snapshot_time, no backlog date) and it has
// no rows (a header-only extract, loaded with max_delete_fraction raised). Dated by the
// load's wall-clock time instead, its deletes would land anywhere in the history.
func (s *Ingest) checkDated(snap *delta.Snapshot, files []*sourceFile, absent int64, hasTop bool) error {
	if hasTop || absent == 0 || s.cfg.SnapshotTime != "" || s.cfg.SequenceBy == "" || !s.timeSequence(snap) || len(files) > 0 && files[0].dated != nil {
		return nil
	}
	return fmt.Errorf("%s: this snapshot has no rows, so no %s to date it by: the %s keys it lacks would be closed at no time of theirs; nothing was written. "+
		"To load an empty snapshot, date it with snapshot_time (file_name, or a time such as ${run.slot})",
		strings.Join(fileNames(files), ", "), s.cfg.SequenceBy, thousands(absent))
}

// thousands writes n with thousands separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
