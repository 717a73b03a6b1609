package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
)

// CaptureHistory copies a table's change data feed into a permanent history table, so
// that its changes outlive the source's log and file retention.
//
// Each run reads the source's change feed over (last captured version, latest version at
// stage start] — every change type, with _change_type, _commit_version and
// _commit_timestamp — and appends the rows to the history table in ONE commit that also
// records the last captured source version as a txn action (appId
// "capture_history:<source table>"). A crash before that commit leaves the history table
// unchanged; a rerun after it finds nothing new. The first run starts at
// starting_version, or else at the version from which the source's change feed has been
// enabled ever since.
//
// It fails, writing nothing, when the versions it needs were cleaned from the source's log
// or their files vacuumed, when the change feed was off for part of the range, or when a
// source column is missing from the history table or has another type (unless
// schema_evolution, which adds new source columns to the history table as nullable).
type CaptureHistory struct {
	name string
	cfg  *CaptureHistoryConfig
}

// NewCaptureHistory returns the stage for a validated config.
func NewCaptureHistory(name string, cfg *CaptureHistoryConfig) *CaptureHistory {
	return &CaptureHistory{name: name, cfg: cfg}
}

// Name implements Stage.
func (s *CaptureHistory) Name() string { return s.name }

// Kind implements Stage.
func (s *CaptureHistory) Kind() Kind { return KindCaptureHistory }

// AppID is the txn appId under which the stage records its progress in the history table.
func (s *CaptureHistory) AppID() string { return "capture_history:" + s.cfg.Source }

// Run implements Stage.
func (s *CaptureHistory) Run(ctx context.Context, env *Env) (Result, error) {
	res, err := timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
	res.Expectations = env.rowResults()
	return res, err
}

func (s *CaptureHistory) run(ctx context.Context, env *Env) (Result, error) {
	var res Result
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return res, err
	}
	if err := env.startRowChecks(s.name, f.dstDecl.Name); err != nil {
		return res, err
	}
	srcDecl, dstDecl, src, dst, dstSnap := f.srcDecl, f.dstDecl, f.src, f.dst, f.dstSnap
	from, latest, err := s.captureRange(ctx, f)
	if err != nil {
		return res, err
	}
	res.VersionsRead = []TableVersion{{Table: srcDecl.Name, Version: latest}}
	if from > latest {
		res.Notes = append(res.Notes, fmt.Sprintf("up to date: %s captured through version %d", srcDecl.Name, latest))
		return res, nil
	}

	res.ChangesRead = []ChangeRange{{Table: srcDecl.Name, After: from - 1, Through: latest}}
	segs, err := captureSegments(ctx, src, from, latest, f.srcSnap.Schema())
	if err != nil {
		return res, err
	}
	// Renames since the previous capture's last version, when the log still has it.
	prior := map[string]string{}
	if from > 0 {
		if snap, err := src.SnapshotAt(ctx, from-1); err == nil {
			prior = delta.RenamesByID(snap.Schema(), f.srcSnap.Schema())
		}
	}
	if dstSnap, err = s.followSource(ctx, env, f, segs, prior, &res); err != nil {
		return res, fmt.Errorf("history table %s does not fit source %s: %w", dstDecl.Name, srcDecl.Name, err)
	}
	f.dstSnap = dstSnap
	writer, err := delta.NewDataWriter(dst.Store(), dst.Root(), dstSnap.Schema(), dstSnap.PartitionColumns(), delta.WriteOptions{})
	if err != nil {
		return res, err
	}
	for _, seg := range segs {
		if err := s.writeSegment(ctx, env, src, seg, writer, &res); err != nil {
			writer.Abort()
			return res, err
		}
	}
	adds, err := writer.Close(ctx)
	if err != nil {
		return res, err
	}
	res.RowsWritten = res.RowsRead
	res.FilesWritten = int64(len(adds))
	for _, a := range adds {
		res.BytesWritten += a.Size
	}
	v, err := s.commitHistory(ctx, env, f, adds, latest, &res)
	if err != nil {
		return res, err
	}
	res.VersionsWritten = []TableVersion{{Table: dstDecl.Name, Version: v}}
	res.Notes = append(res.Notes, fmt.Sprintf("captured %s versions %d..%d", srcDecl.Name, from, latest))
	return res, nil
}

// A segment is a stretch of the captured versions with one source schema: the change
// feed reads each version in the schema of its range's end, so the range is cut where
// the schema changed, and a column dropped later keeps its values before the drop.
type segment struct {
	from, to int64
	schema   *delta.StructType // the source's at to, its columns named as in the latest
	renames  map[string]string // a column's name at to -> its name in the latest schema
}

// captureSegments cuts from..latest where the source's metadata changed.
func captureSegments(ctx context.Context, src *delta.Table, from, latest int64, latestSchema *delta.StructType) ([]segment, error) {
	cuts, err := src.SchemaVersions(ctx, from, latest)
	if err != nil {
		return nil, err
	}
	var segs []segment
	lo := from
	for _, c := range append(cuts, latest+1) {
		if c <= lo {
			continue
		}
		seg := segment{from: lo, to: c - 1, schema: latestSchema}
		if seg.to != latest {
			snap, err := src.SnapshotAt(ctx, seg.to)
			if err != nil {
				return nil, err
			}
			seg.renames = delta.RenamesByID(snap.Schema(), latestSchema)
			seg.schema = &delta.StructType{}
			for _, f := range snap.Schema().Fields {
				nf := *f
				if n, ok := seg.renames[f.Name]; ok {
					nf.Name = n
				}
				seg.schema.Fields = append(seg.schema.Fields, &nf)
			}
		}
		seg.schema = withChangeColumns(seg.schema)
		segs = append(segs, seg)
		lo = c
	}
	return segs, nil
}

// withChangeColumns is st with the columns a change feed adds to each row.
func withChangeColumns(st *delta.StructType) *delta.StructType {
	out := &delta.StructType{Fields: slices.Clone(st.Fields)}
	for _, c := range [][2]string{{delta.ChangeTypeColumn, delta.TypeString}, {delta.CommitVersionColumn, delta.TypeLong}, {delta.CommitTimestampColumn, delta.TypeTimestamp}} {
		out.Fields = append(out.Fields, &delta.StructField{Name: c[0], Type: &delta.PrimitiveType{Name: c[1]}, Nullable: true, Metadata: map[string]any{}})
	}
	return out
}

// followSource makes the history table hold every column the segments have: with
// schema_evolution a new source column is added, a widened one widened and a renamed
// one renamed (turning column mapping on if needed), in one metadata-only commit before
// the rows are written (a rerun after a crash finds it made); a dropped source column
// stays, NULL from then on. prior holds the source's renames since the versions
// captured before. Without schema_evolution a column the table lacks or holds
// narrower is an error naming the declaration to make. It returns the table's snapshot
// to write to.
func (s *CaptureHistory) followSource(ctx context.Context, env *Env, f *flow, segs []segment, prior map[string]string, res *Result) (*delta.Snapshot, error) {
	have := f.dstSnap.Schema()
	want := &delta.StructType{Fields: slices.Clone(have.Fields)}
	renamed := map[string]string{}
	var problems []string
	for _, seg := range segs {
		for _, c := range seg.schema.Fields {
			h := want.Field(c.Name)
			old := ""
			for _, renames := range []map[string]string{prior, seg.renames} {
				for o, n := range renames {
					if n == c.Name && want.Field(o) != nil {
						old = o
					}
				}
			}
			switch {
			case h == nil && old != "" && s.cfg.SchemaEvolution:
				renamed[c.Name] = old
				i := want.FieldIndex(old)
				nf := *want.Fields[i]
				nf.Name = c.Name
				want.Fields[i] = &nf
				h = &nf
			case h == nil && old != "":
				problems = append(problems, fmt.Sprintf("source column %s was renamed %s (declare {name: %s, ..., renamed_from: %s} on the history table, or set schema_evolution: true)", old, c.Name, c.Name, old))
				continue
			case h == nil && s.cfg.SchemaEvolution:
				want.Fields = append(want.Fields, &delta.StructField{Name: c.Name, Type: c.Type, Nullable: true, Metadata: map[string]any{}})
				continue
			case h == nil:
				problems = append(problems, fmt.Sprintf("source column %s (%s) is missing from the history table (declare it, or set schema_evolution: true)", c.Name, c.Type))
				continue
			}
			switch {
			case h.Type.String() == c.Type.String() || delta.CanWiden(c.Type, h.Type):
			case delta.CanWiden(h.Type, c.Type) && s.cfg.SchemaEvolution:
				nf := *h
				nf.Type = c.Type
				want.Fields[want.FieldIndex(c.Name)] = &nf
			case delta.CanWiden(h.Type, c.Type):
				problems = append(problems, fmt.Sprintf("column %s is %s in the source but %s in the history table (declare it as %s, or set schema_evolution: true)", c.Name, c.Type, h.Type, c.Type))
			default:
				problems = append(problems, fmt.Sprintf("column %s is %s in the source but %s in the history table", c.Name, c.Type, h.Type))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	opts := delta.EvolutionOptions{RenamedFrom: renamed, KeepUndeclared: true}
	if len(renamed) > 0 {
		opts.ColumnMapping = "name"
	}
	ev, planProblems := delta.PlanEvolution(f.dstSnap, want, opts)
	for _, p := range planProblems {
		problems = append(problems, "column "+p.Column+": "+p.What)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	if len(ev.Steps) == 0 {
		return f.dstSnap, nil
	}
	if _, err := f.dst.Evolve(ctx, ev, env.lineage()); err != nil {
		return nil, err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("schema evolution: %v", ev.Steps))
	return f.dst.Snapshot(ctx)
}

// writeSegment writes the change rows of one segment, its columns named as the history
// table names them.
func (s *CaptureHistory) writeSegment(ctx context.Context, env *Env, src *delta.Table, seg segment, writer *delta.DataWriter, res *Result) error {
	from, to := seg.from, seg.to
	opts := delta.ChangesOptions{StartVersion: &from, EndVersion: &to}
	if s.cfg.IgnoreDeletes {
		opts.Types = []string{delta.ChangeInsert, delta.ChangeUpdatePreimage, delta.ChangeUpdatePostimage}
	}
	changes, err := src.Changes(ctx, opts)
	if err != nil {
		return err
	}
	defer changes.Release()
	out := changes.Schema()
	if len(seg.renames) > 0 {
		fields := slices.Clone(out.Fields())
		for i := range fields {
			if n, ok := seg.renames[fields[i].Name]; ok {
				fields[i].Name = n
			}
		}
		out = arrow.NewSchema(fields, nil)
	}
	for changes.Next() {
		rec := changes.RecordBatch()
		rec.Retain()
		if len(seg.renames) > 0 {
			renamed := array.NewRecordBatch(out, rec.Columns(), rec.NumRows())
			rec.Release()
			rec = renamed
		}
		if checks := env.rows; checks != nil { // the history rows, before they are written
			kept, _, err := checks.keep(rec, func(i int) string { return historyRowAt(s.cfg.Source, rec, i) }, nil) // (capture quarantines nothing)
			rec.Release()
			if err != nil {
				return err
			}
			rec = kept
		}
		err = writer.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("write history rows: %w", err)
		}
		res.RowsRead += rec.NumRows()
		report(env, res.RowsRead, res.RowsRead)
	}
	return changes.Err()
}

// commitHistory commits the history files adds as an append with the capture's txn
// (through source version latest).
func (s *CaptureHistory) commitHistory(ctx context.Context, env *Env, f *flow, adds []*delta.Add, latest int64, res *Result) (int64, error) {
	tx := f.dst.NewTransaction(f.dstSnap, delta.TxOptions{
		Operation: "WRITE",
		OperationParameters: map[string]any{
			"mode":        "Append",
			"partitionBy": "[]",
		},
		OperationMetrics: map[string]int64{
			"numFiles":       res.FilesWritten,
			"numOutputRows":  res.RowsWritten,
			"numOutputBytes": res.BytesWritten,
		},
		Lineage: env.lineage(),
	})
	tx.AddFiles(adds...)
	tx.SetTxn(s.AppID(), latest)
	v, err := tx.Commit(ctx)
	if err != nil {
		return 0, fmt.Errorf("commit to %s: %w", f.dstDecl.Name, err)
	}
	return v, nil
}

func feedOn(s *delta.Snapshot) bool { return s.ChangeDataFeedEnabled() }

// report passes progress to the environment's display, if any.
func report(env *Env, read, written int64) {
	if env.Progress != nil {
		env.Progress(Progress{RowsRead: read, RowsWritten: written})
	}
}

// historyRowAt names the change of source a history row records.
func historyRowAt(source string, rec arrow.RecordBatch, i int) string {
	at := source
	if idx := rec.Schema().FieldIndices(delta.CommitVersionColumn); len(idx) == 1 && rec.Column(idx[0]).IsValid(i) {
		at += " version " + rec.Column(idx[0]).ValueStr(i)
	}
	if idx := rec.Schema().FieldIndices(delta.ChangeTypeColumn); len(idx) == 1 && rec.Column(idx[0]).IsValid(i) {
		at += " (" + rec.Column(idx[0]).ValueStr(i) + ")"
	}
	return at
}
