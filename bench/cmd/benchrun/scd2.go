package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The SCD2 case. The stage runs with a snapshot source (compared with the dimension's
// current rows; a current key missing from the snapshot is a delete, closed). A first
// run from staging.customers_day1 (the initial N customers) builds the N-row dimension
// (not timed); the timed run merges staging.customers, the change batch. The batch has
// one row per existing key plus the new keys:
//
//	i%10 == 1      tracked change (city); i%2000 == 1 sets segment to NULL instead
//	i%2000 == 0    segment was NULL and gets a value (a change from NULL)
//	i%200 == 5     delete (op = 'D'; absent from our snapshot source)
//	otherwise      the current values again (no change)
//	N .. N+N/100   new keys
//
// so ~10% tracked changes (1% of them to or from NULL), 1% new keys, 0.5% deletes.
// The whole batch (deletes as op = 'D' rows) is written to scd2/changes.parquet and the
// dimension before the timed run to scd2/dim.parquet, for DuckDB and delta-rs.

var (
	scd2Day1 = time.Date(2026, 1, 14, 8, 0, 0, 0, time.UTC)
	scd2Day2 = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
)

const scd2StagingJSON = `{"type":"struct","fields":[
 {"name":"customer_id","type":"string","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"city","type":"string","nullable":true,"metadata":{}},
 {"name":"segment","type":"string","nullable":true,"metadata":{}},
 {"name":"updated_at","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"op","type":"string","nullable":true,"metadata":{}}]}`

const scd2DimJSON = `{"type":"struct","fields":[
 {"name":"customer_sk","type":"long","nullable":false,"metadata":{}},
 {"name":"customer_id","type":"string","nullable":true,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"city","type":"string","nullable":true,"metadata":{}},
 {"name":"segment","type":"string","nullable":true,"metadata":{}},
 {"name":"valid_from","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"valid_to","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"is_current","type":"boolean","nullable":true,"metadata":{}}]}`

func scd2Tables() (day1, staging, dim *jobs.Table, err error) {
	ss, err := delta.ParseSchema(scd2StagingJSON)
	if err != nil {
		return nil, nil, nil, err
	}
	ds, err := delta.ParseSchema(scd2DimJSON)
	if err != nil {
		return nil, nil, nil, err
	}
	delta.SetIdentity(ds.Field("customer_sk"), 1, 1, false)
	cdf := delta.ChangeDataFeedProperties()
	return &jobs.Table{Name: "staging.customers_day1", Path: "staging/customers_day1", Schema: ss},
		&jobs.Table{Name: "staging.customers", Path: "staging/customers", Schema: ss},
		&jobs.Table{Name: "sales.customer", Path: "sales/customer", Schema: ds, Properties: cdf}, nil
}

func scd2Stage(source string) *jobs.SCD2Merge {
	return jobs.NewSCD2Merge("merge_customers", &jobs.SCD2Config{
		Source: source, Target: "sales.customer",
		Keys: []string{"customer_id"}, Track: []string{"city", "segment"}, Type1: []string{"name"},
		SequenceBy: "updated_at", Deletes: "close",
		Columns: jobs.SCDColumns{SurrogateKey: "customer_sk"},
	})
}

// scd2Batches builds the initial rows and the change batch for n keys, in batches.
func scd2Batches(sch *arrow.Schema, n int) (initial, changes []arrow.RecordBatch) {
	const batch = 65536
	build := func(lo, hi int, day2 bool) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		for i := lo; i < hi; i++ {
			id := "C" + strconv.Itoa(10_000_000 + i)[1:]
			city := "city-" + strconv.Itoa(i%1000)
			seg, segNull := "seg-"+strconv.Itoa(i%7), i%2000 == 0
			op, at := "I", scd2Day1
			if day2 {
				op, at = "U", scd2Day2
				switch {
				case i >= n:
					op = "I"
				case i%200 == 5:
					op = "D"
				case i%2000 == 1:
					segNull = true
				case i%10 == 1:
					city = "city-" + strconv.Itoa(i%1000+1)
				case i%2000 == 0:
					segNull, seg = false, "seg-new"
				}
			}
			b.Field(0).(*array.StringBuilder).Append(id)
			b.Field(1).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
			b.Field(2).(*array.StringBuilder).Append(city)
			if segNull {
				b.Field(3).(*array.StringBuilder).AppendNull()
			} else {
				b.Field(3).(*array.StringBuilder).Append(seg)
			}
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
			b.Field(5).(*array.StringBuilder).Append(op)
		}
		return b.NewRecordBatch()
	}
	for lo := 0; lo < n; lo += batch {
		initial = append(initial, build(lo, min(lo+batch, n), false))
	}
	total := n + n/100
	for lo := 0; lo < total; lo += batch {
		changes = append(changes, build(lo, min(lo+batch, total), true))
	}
	return initial, changes
}

// withoutDeletes returns the rows of rec whose op is not 'D'.
func withoutDeletes(rec arrow.RecordBatch) arrow.RecordBatch {
	ops := rec.Column(5).(*array.String)
	b := array.NewRecordBuilder(memory.DefaultAllocator, rec.Schema())
	defer b.Release()
	for i := range int(rec.NumRows()) {
		if ops.Value(i) == "D" {
			continue
		}
		for c := range int(rec.NumCols()) {
			col := rec.Column(c)
			if col.IsNull(i) {
				b.Field(c).AppendNull()
				continue
			}
			switch a := col.(type) {
			case *array.String:
				b.Field(c).(*array.StringBuilder).Append(a.Value(i))
			case *array.Timestamp:
				b.Field(c).(*array.TimestampBuilder).Append(a.Value(i))
			}
		}
	}
	return b.NewRecordBatch()
}

// createWith creates a declared table and commits recs to it as one append.
func createWith(ctx context.Context, wh objectstore.Store, decl *jobs.Table, recs []arrow.RecordBatch) error {
	tbl, err := delta.Create(ctx, wh, decl.Path, delta.CreateOptions{Schema: decl.Schema, Properties: decl.Properties, Name: decl.Name}, delta.Options{})
	if err != nil {
		return err
	}
	return appendRecords(ctx, tbl, recs)
}

// appendRecords commits recs to tbl as one append.
func appendRecords(ctx context.Context, tbl *delta.Table, recs []arrow.RecordBatch) error {
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	w, err := snap.NewDataWriter(delta.WriteOptions{})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			w.Abort()
			return err
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	_, err = tx.Commit(ctx)
	return err
}

// scd2Setup builds staging and the dimension in the warehouse scd2/wh and writes the
// Parquet copies for the peers: args scd2Dir n.
func scd2Setup(ctx context.Context, args []string) (measurement, error) {
	dir := args[0]
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	day1, staging, dim, err := scd2Tables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(dir, "wh")})
	if err != nil {
		return measurement{}, err
	}
	env := newEnv(wh, day1, staging, dim)
	asch, err := delta.ArrowSchema(staging.Schema)
	if err != nil {
		return measurement{}, err
	}
	initial, changes := scd2Batches(asch, n)
	if err := createWith(ctx, wh, day1, initial); err != nil {
		return measurement{}, err
	}
	res, err := scd2Stage(day1.Name).Run(ctx, env)
	if err != nil {
		return measurement{}, fmt.Errorf("initial load: %w", err)
	}
	var kept []arrow.RecordBatch
	for _, r := range changes {
		kept = append(kept, withoutDeletes(r))
	}
	if err := createWith(ctx, wh, staging, kept); err != nil {
		return measurement{}, err
	}
	if err := writeParquet(filepath.Join(dir, "changes.parquet"), asch, changes); err != nil {
		return measurement{}, err
	}
	// The dimension before the timed run, as plain Parquet.
	dt, err := delta.Open(ctx, wh, dim.Path, delta.Options{})
	if err != nil {
		return measurement{}, err
	}
	snap, err := dt.Snapshot(ctx)
	if err != nil {
		return measurement{}, err
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		return measurement{}, err
	}
	var recs []arrow.RecordBatch
	var rows int64
	for sc.Next() {
		r := sc.RecordBatch()
		r.Retain()
		recs = append(recs, r)
		rows += r.NumRows()
	}
	if err := sc.Err(); err != nil {
		return measurement{}, err
	}
	dsch, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return measurement{}, err
	}
	if err := writeParquet(filepath.Join(dir, "dim.parquet"), dsch, recs); err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: res.Duration.Seconds(), Rows: rows, Note: "initial load of the dimension"}, nil
}

// scd2Ours runs the timed scd2_merge of the change batch: args scd2Dir batchRows [dv].
// With dv the dimension first gets delta.enableDeletionVectors (not timed), so the merge
// marks closed rows in deletion vectors instead of splicing the dimension's file.
func scd2Ours(ctx context.Context, args []string) (measurement, error) {
	day1, staging, dim, err := scd2Tables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(args[0], "wh")})
	if err != nil {
		return measurement{}, err
	}
	batch, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return measurement{}, err
	}
	if len(args) > 2 && args[2] == "dv" {
		if err := enableDeletionVectors(ctx, wh, dim.Path); err != nil {
			return measurement{}, err
		}
	}
	st := startStep()
	res, err := scd2Stage(staging.Name).Run(ctx, newEnv(wh, day1, staging, dim))
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	// Rows in the dimension afterwards, to compare with the peers' results.
	dt, err := delta.Open(ctx, wh, dim.Path, delta.Options{})
	if err != nil {
		return measurement{}, err
	}
	snap, err := dt.Snapshot(ctx)
	if err != nil {
		return measurement{}, err
	}
	var total int64
	for _, f := range snap.Files() {
		var st struct {
			NumRecords int64 `json:"numRecords"`
		}
		if err := json.Unmarshal([]byte(f.Stats), &st); err != nil {
			return measurement{}, fmt.Errorf("stats of %s: %w", f.Path, err)
		}
		total += st.NumRecords
		if f.DeletionVector != nil {
			total -= f.DeletionVector.Cardinality
		}
	}
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: batch, BytesOut: res.BytesWritten,
		Note: fmt.Sprintf("dimension now %d rows; snapshot source of %d rows (deletes are the missing keys); %s", total, res.RowsRead, joinNotes(res.Notes))}, nil
}

func joinNotes(notes []string) string {
	s := ""
	for i, n := range notes {
		if i > 0 {
			s += "; "
		}
		s += n
	}
	return s
}
