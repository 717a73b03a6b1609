package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// QuarantineColumns are the columns a quarantine table must declare (as strings, except
// line: bigint and load_timestamp: timestamp). It may also declare expectation (a
// string): the name of the row expectation a row violated (NULL for a record that did
// not decode).
var QuarantineColumns = []string{"source_file", "line", "column", "value", "error", "record", "load_timestamp"}

// quarantine writes the bad records of this run's files to the quarantine table, one txn
// per source file in the same commit, skipping files whose records it already holds. It
// runs before the target's commit: a crash between the two reruns the target only.
func (s *Ingest) quarantine(ctx context.Context, env *Env, files []*sourceFile, bad []*badRecord, loadTime time.Time, res *Result) error {
	if s.cfg.OnError != "quarantine" {
		// Only row expectations quarantine: records that did not decode are skipped
		// (on_error: skip) or stopped the run, and with no violator there is nothing to
		// write, nor to guard against writing twice.
		var violators []*badRecord
		for _, b := range bad {
			if b.expectation != "" {
				violators = append(violators, b)
			}
		}
		if len(violators) == 0 {
			return nil
		}
		bad = violators
	}
	decl, err := env.declared(s.cfg.QuarantineTable)
	if err != nil {
		return err
	}
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	appID := func(f string) string { return "ingest-quarantine:" + s.cfg.Target + ":" + f }
	var pending []*sourceFile
	for _, f := range files {
		if _, done := snap.TxnVersion(appID(f.Name)); !done {
			pending = append(pending, f)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, f := range pending {
		want[f.Name] = true
	}
	schema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return err
	}
	rec, rows := quarantineRows(schema, bad, want, loadTime)
	defer rec.Release()

	var adds []*delta.Add
	if rows > 0 {
		if adds, err = delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []arrow.RecordBatch{rec}, delta.WriteOptions{}); err != nil {
			return fmt.Errorf("write quarantine %s: %w", decl.Name, err)
		}
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": int64(rows)},
		Lineage:             env.lineage(),
	})
	tx.AddFiles(adds...)
	for _, f := range pending {
		tx.SetTxn(appID(f.Name), f.Version)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit quarantine %s: %w", decl.Name, err)
	}
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: v})
	res.Notes = append(res.Notes, fmt.Sprintf("quarantined %d bad records in %s", rows, decl.Name))
	return nil
}

// quarantineRows are the bad records of the files in want as rows of the quarantine
// table (schema), and their number.
func quarantineRows(schema *arrow.Schema, bad []*badRecord, want map[string]bool, loadTime time.Time) (arrow.RecordBatch, int) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rows := 0
	for _, r := range bad {
		if !want[r.file] {
			continue
		}
		rows++
		for i, f := range schema.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "source_file":
				fb.(*array.StringBuilder).Append(r.file)
			case "line":
				fb.(*array.Int64Builder).Append(r.err.Line)
			case "column":
				fb.(*array.StringBuilder).Append(r.err.Column)
			case "value":
				fb.(*array.StringBuilder).Append(r.err.Value)
			case "error":
				fb.(*array.StringBuilder).Append(r.err.Error())
			case "record":
				fb.(*array.StringBuilder).Append(r.err.Record)
			case "expectation":
				if r.expectation == "" {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(r.expectation)
				}
			case "load_timestamp":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(loadTime.UnixMicro()))
			default:
				fb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch(), rows
}
