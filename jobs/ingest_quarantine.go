package jobs

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
	q, err := openQuarantine(ctx, env, s.cfg.QuarantineTable)
	if err != nil {
		return err
	}
	appID := func(f string) string { return "ingest-quarantine:" + s.cfg.Target + ":" + f }
	var txns []quarantineTxn
	want := map[string]bool{}
	for _, f := range files {
		if _, done := q.done(appID(f.Name)); !done {
			txns = append(txns, quarantineTxn{appID(f.Name), f.Version})
			want[f.Name] = true
		}
	}
	if len(txns) == 0 {
		return nil
	}
	rec, rows := quarantineRows(q.schema, bad, want, loadTime)
	defer rec.Release()
	return q.append(ctx, env, rec, rows, txns, "bad records", res)
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
				if r.file != "" {
					fb.(*array.StringBuilder).Append(r.file)
				} else {
					fb.AppendNull()
				}
			case "line":
				if r.err.Line > 0 {
					fb.(*array.Int64Builder).Append(r.err.Line)
				} else {
					fb.AppendNull() // a merge's event, a Parquet record that did not decode: no line
				}
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
