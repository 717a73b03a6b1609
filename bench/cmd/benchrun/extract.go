package main

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The extract case: a daily full extract appended to a staging table and merged into an
// SCD2 dimension from the staging table's change feed, at growing sizes, for the memory
// budget. Per size N: a staging table with N customers (day 1, change data feed on);
// the first load of the dimension from it (timed: N new keys); the full extract of day 2
// appended (every key again, every tenth with a new city, plus N/100 new keys); its
// merge (timed: a batch as large as the dimension). Each engine (ours, and with
// -baseline a benchrun built from another tree, e.g. main) runs on its own copy of the
// day-1 staging table.

var extractDays = [2]time.Time{time.Date(2026, 1, 14, 8, 0, 0, 0, time.UTC), time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)}

func extractTables() (staging, dim *jobs.Table, err error) {
	_, staging, dim, err = scd2Tables()
	if err != nil {
		return nil, nil, err
	}
	staging.Properties = delta.ChangeDataFeedProperties()
	return staging, dim, nil
}

func extractStage(budget int64) *jobs.SCD2Merge {
	cfg := &jobs.SCD2Config{
		Source: "staging.customers", SourceChanges: true, Target: "sales.customer",
		Keys: []string{"customer_id"}, Track: []string{"city", "segment"}, Type1: []string{"name"},
		SequenceBy: "updated_at", Deletes: "close",
		Columns: jobs.SCDColumns{SurrogateKey: "customer_sk"},
	}
	setBudget(cfg, budget)
	return jobs.NewSCD2Merge("merge_customers", cfg)
}

// extractRows appends the rows of keys [lo, hi) on day (0 or 1) to b: on day 1 every
// tenth key has a new city, and keys from n on are new.
func extractRows(b *array.RecordBuilder, lo, hi, n, day int) {
	for i := lo; i < hi; i++ {
		city := "city-" + strconv.Itoa(i%1000)
		if day == 1 && i < n && i%10 == 1 {
			city = "city-" + strconv.Itoa(i%1000+1)
		}
		op := "I"
		if day == 1 {
			op = "U"
		}
		b.Field(0).(*array.StringBuilder).Append("C" + strconv.Itoa(100_000_000 + i)[1:])
		b.Field(1).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
		b.Field(2).(*array.StringBuilder).Append(city)
		b.Field(3).(*array.StringBuilder).Append("seg-" + strconv.Itoa(i%7))
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(extractDays[day].UnixMicro()))
		b.Field(5).(*array.StringBuilder).Append(op)
	}
}

// extractAppend appends the rows of keys [0, count) of a day to staging as one commit,
// built and written a batch at a time.
func extractAppend(ctx context.Context, wh *fs.Store, staging *jobs.Table, count, n, day int) error {
	exists, err := delta.Exists(ctx, wh, staging.Path)
	if err != nil {
		return err
	}
	var tbl *delta.Table
	if exists {
		tbl, err = delta.Open(ctx, wh, staging.Path, delta.Options{})
	} else {
		tbl, err = delta.Create(ctx, wh, staging.Path, delta.CreateOptions{Schema: staging.Schema, Properties: staging.Properties, Name: staging.Name}, delta.Options{})
	}
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	sch, err := delta.ArrowSchema(staging.Schema)
	if err != nil {
		return err
	}
	w, err := snap.NewDataWriter(delta.WriteOptions{StreamFiles: true})
	if err != nil {
		return err
	}
	for lo := 0; lo < count; lo += 65536 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		extractRows(b, lo, min(lo+65536, count), n, day)
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			w.Abort()
			return err
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", OperationParameters: map[string]any{"mode": "Append"}})
	tx.AddFiles(adds...)
	_, err = tx.Commit(ctx)
	return err
}

// extractSetup writes day 1 (args: dir n) or appends day 2 (args: dir n day2) to the
// staging table of the warehouse dir/wh.
func extractSetup(ctx context.Context, args []string) (measurement, error) {
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	staging, _, err := extractTables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(args[0], "wh")})
	if err != nil {
		return measurement{}, err
	}
	if len(args) > 2 && args[2] == "day2" {
		return measurement{Rows: int64(n + n/100)}, extractAppend(ctx, wh, staging, n+n/100, n, 1)
	}
	return measurement{Rows: int64(n)}, extractAppend(ctx, wh, staging, n, n, 0)
}

// extractMerge runs the timed scd2_merge from staging's change feed: args dir rows
// [budget] (a -memory-budget value; default the stage's).
func extractMerge(ctx context.Context, args []string) (measurement, error) {
	staging, dim, err := extractTables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(args[0], "wh")})
	if err != nil {
		return measurement{}, err
	}
	rows, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return measurement{}, err
	}
	var budget int64
	if len(args) > 2 {
		if budget, err = parseBudget(args[2]); err != nil {
			return measurement{}, err
		}
	}
	st := startStep()
	res, err := extractStage(budget).Run(ctx, newEnv(wh, staging, dim))
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: rows, BytesOut: res.BytesWritten, Note: joinNotes(res.Notes)}, nil
}
