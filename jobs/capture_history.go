package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	return timed(ctx, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
}

func (s *CaptureHistory) run(ctx context.Context, env *Env) (Result, error) {
	var res Result
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
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
	opts := delta.ChangesOptions{StartVersion: &from, EndVersion: &latest}
	if s.cfg.IgnoreDeletes {
		opts.Types = []string{delta.ChangeInsert, delta.ChangeUpdatePreimage, delta.ChangeUpdatePostimage}
	}
	changes, err := src.Changes(ctx, opts)
	if err != nil {
		return res, err
	}
	defer changes.Release()
	changeCols, err := delta.SchemaFromArrow(changes.Schema())
	if err != nil {
		return res, err
	}
	merged, added, err := fitHistorySchema(dstSnap.Schema(), changeCols, s.cfg.SchemaEvolution)
	if err != nil {
		return res, fmt.Errorf("history table %s does not fit source %s: %w", dstDecl.Name, srcDecl.Name, err)
	}

	adds, err := writeHistory(ctx, env, dst, dstSnap, merged, changes, &res)
	if err != nil {
		return res, err
	}
	v, err := s.commitHistory(ctx, env, f, merged, added, adds, latest, &res)
	if err != nil {
		return res, err
	}
	res.VersionsWritten = []TableVersion{{Table: dstDecl.Name, Version: v}}
	res.Notes = append(res.Notes, fmt.Sprintf("captured %s versions %d..%d", srcDecl.Name, from, latest))
	return res, nil
}

// writeHistory writes the change rows into data files of the history table (schema:
// its schema with the columns the changes add) and counts them in res.
func writeHistory(ctx context.Context, env *Env, dst *delta.Table, dstSnap *delta.Snapshot, schema *delta.StructType, changes *delta.ChangesReader, res *Result) ([]*delta.Add, error) {
	writer, err := delta.NewDataWriter(dst.Store(), dst.Root(), schema, dstSnap.PartitionColumns(), delta.WriteOptions{})
	if err != nil {
		return nil, err
	}
	for changes.Next() {
		rec := changes.RecordBatch()
		if err := writer.Write(ctx, rec); err != nil {
			writer.Abort()
			return nil, fmt.Errorf("write history rows: %w", err)
		}
		res.RowsRead += rec.NumRows()
		report(env, res.RowsRead, res.RowsRead)
	}
	if err := changes.Err(); err != nil {
		writer.Abort()
		return nil, err
	}
	adds, err := writer.Close(ctx)
	if err != nil {
		return nil, err
	}
	res.RowsWritten = res.RowsRead
	res.FilesWritten = int64(len(adds))
	for _, a := range adds {
		res.BytesWritten += a.Size
	}
	return adds, nil
}

// commitHistory commits the history files adds as an append with the capture's txn
// (through source version latest), and the schema with the added columns when there
// are any.
func (s *CaptureHistory) commitHistory(ctx context.Context, env *Env, f *flow, schema *delta.StructType, added []string, adds []*delta.Add, latest int64, res *Result) (int64, error) {
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
	if len(added) > 0 {
		newMD := *f.dstSnap.Metadata()
		var err error
		if newMD.SchemaString, err = schema.SchemaString(); err != nil {
			return 0, err
		}
		tx.UpdateMetadata(&newMD)
		res.Notes = append(res.Notes, "schema evolution: added "+strings.Join(added, ", "))
	}
	tx.AddFiles(adds...)
	tx.SetTxn(s.AppID(), latest)
	v, err := tx.Commit(ctx)
	if err != nil {
		return 0, fmt.Errorf("commit to %s: %w", f.dstDecl.Name, err)
	}
	return v, nil
}

func feedOn(s *delta.Snapshot) bool { return s.ChangeDataFeedEnabled() }

// fitHistorySchema checks that every change-feed column exists in the history schema with
// the same type; with evolve, missing columns are appended as nullable.
func fitHistorySchema(history, changes *delta.StructType, evolve bool) (*delta.StructType, []string, error) {
	merged := &delta.StructType{Fields: append([]*delta.StructField(nil), history.Fields...)}
	var added, problems []string
	for _, f := range changes.Fields {
		h := history.Field(f.Name)
		switch {
		case h == nil && evolve:
			merged.Fields = append(merged.Fields, &delta.StructField{Name: f.Name, Type: f.Type, Nullable: true, Metadata: map[string]any{}})
			added = append(added, f.Name+" "+f.Type.String())
		case h == nil:
			problems = append(problems, fmt.Sprintf("source column %s (%s) is missing from the history table (declare it, or set schema_evolution: true)", f.Name, f.Type))
		case h.Type.String() != f.Type.String():
			problems = append(problems, fmt.Sprintf("column %s is %s in the source but %s in the history table", f.Name, f.Type, h.Type))
		}
	}
	if len(problems) > 0 {
		return nil, nil, errors.New(strings.Join(problems, "; "))
	}
	return merged, added, nil
}

// report passes progress to the environment's display, if any.
func report(env *Env, read, written int64) {
	if env.Progress != nil {
		env.Progress(Progress{RowsRead: read, RowsWritten: written})
	}
}
