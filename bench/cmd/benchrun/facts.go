package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The facts case: keying facts as of their time. A dimension of K customers with 3
// versions each (valid from day 0, 10 and 20 of January 2026, the last one open) and a
// source of F sales spread over 30 days, one in 1,000 of them for a customer the
// dimension lacks (the unknown member). Timed: our fact_load stage's first load (every
// fact looked up), against DuckDB's ASOF JOIN and its range join writing the keyed
// facts to Parquet from the same data as Parquet; then a late event that splits the
// middle version of 1% of the keys, and our next run, which re-keys the facts of those
// keys in the split range (its time against the first load's says whether the cost is
// in proportion to the facts affected).

var factsBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const factsSalesJSON = `{"type":"struct","fields":[
 {"name":"sale_id","type":"string","nullable":false,"metadata":{}},
 {"name":"customer_id","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"long","nullable":true,"metadata":{}},
 {"name":"sold_at","type":"timestamp","nullable":true,"metadata":{}}]}`

const factsKeyedJSON = `{"type":"struct","fields":[
 {"name":"sale_id","type":"string","nullable":false,"metadata":{}},
 {"name":"customer_id","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"long","nullable":true,"metadata":{}},
 {"name":"sold_at","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"customer_sk","type":"long","nullable":true,"metadata":{}}]}`

// factsTables declares the dimension, the sales source and the fact table.
func factsTables() (dim, sales, facts *jobs.Table, err error) {
	ds, err := delta.ParseSchema(scd2DimJSON)
	if err != nil {
		return nil, nil, nil, err
	}
	ss, err := delta.ParseSchema(factsSalesJSON)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, err := delta.ParseSchema(factsKeyedJSON)
	if err != nil {
		return nil, nil, nil, err
	}
	cdf := delta.ChangeDataFeedProperties()
	// The fact table has deletion vectors on, as a table whose facts are re-keyed should:
	// re-keying then marks the re-keyed facts and writes them anew, not their files.
	factProps := delta.ChangeDataFeedProperties()
	factProps[delta.PropEnableDeletionVectors] = "true"
	return &jobs.Table{Name: "sales.customer", Path: "sales/customer", Schema: ds, Properties: cdf},
		&jobs.Table{Name: "staging.sales", Path: "staging/sales", Schema: ss, Properties: delta.ChangeDataFeedProperties()},
		&jobs.Table{Name: "sales.sales", Path: "sales/sales", Schema: fs, Properties: factProps}, nil
}

func factsStage() *jobs.FactLoad {
	l := jobs.FactLookup{Dimension: "sales.customer", On: map[string]string{"customer_id": "customer_id"}, At: "sold_at", Key: "customer_sk"}
	l.SetDimensionColumns(jobs.SCDColumns{SurrogateKey: "customer_sk"})
	return jobs.NewFactLoad("load_sales", &jobs.FactLoadConfig{Source: "staging.sales", Target: "sales.sales", Keys: []string{"sale_id"}, Lookups: []jobs.FactLookup{l}})
}

func factsCustomer(i int) string { return "C" + strconv.Itoa(100_000_000 + i)[1:] }

func factsTS(t time.Time) arrow.Timestamp { return arrow.Timestamp(t.UnixMicro()) }

// factsBatches builds rows [0, n) with fill, a batch of 65,536 at a time.
func factsBatches(sch *arrow.Schema, n int, fill func(b *array.RecordBuilder, i int)) []arrow.RecordBatch {
	var recs []arrow.RecordBatch
	for lo := 0; lo < n; lo += 65536 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for i := lo; i < min(n, lo+65536); i++ {
			fill(b, i)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return recs
}

// factsSale appends sale i (of customers [0, nk), every thousandth one the dimension
// lacks, over 30 days) to b.
func factsSale(b *array.RecordBuilder, i, nk int) {
	factsSaleAt(b, i, nk, factsTS(factsBase.Add(time.Duration(i%(30*24*60))*time.Minute)))
}

// factsSaleAt appends sale i sold at t.
func factsSaleAt(b *array.RecordBuilder, i, nk int, t arrow.Timestamp) {
	c := (i * 7919) % nk
	if i%1000 == 999 {
		c = nk + i%100 // a customer the dimension lacks
	}
	b.Field(0).(*array.StringBuilder).Append("S" + strconv.Itoa(1_000_000_000 + i)[1:])
	b.Field(1).(*array.StringBuilder).Append(factsCustomer(c))
	b.Field(2).(*array.Int64Builder).Append(int64(i % 1000))
	b.Field(3).(*array.TimestampBuilder).Append(t)
}

// factsAppend appends the next day's sales to the sales source, one commit: args dir
// facts keys new (sales [facts, facts+new)).
func factsAppend(ctx context.Context, args []string) (measurement, error) {
	return factsChange(ctx, args, false)
}

// factsUpdate changes the sales source in place, then appends to it: an UPDATE of the
// amount of 1% of its sales (every file rewritten), then the next day's sales as
// factsAppend does: args dir facts keys new.
func factsUpdate(ctx context.Context, args []string) (measurement, error) {
	return factsChange(ctx, args, true)
}

func factsChange(ctx context.Context, args []string, update bool) (measurement, error) {
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(args[i+1])
		if err != nil {
			return measurement{}, err
		}
		n[i] = v
	}
	_, sales, _, err := factsTables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(args[0], "wh")})
	if err != nil {
		return measurement{}, err
	}
	tbl, err := delta.Open(ctx, wh, sales.Path, delta.Options{})
	if err != nil {
		return measurement{}, err
	}
	m := measurement{Rows: int64(n[2])}
	if update {
		r, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Lt("amount", int64(10)), Set: map[string]any{"amount": int64(-1)}})
		if err != nil {
			return measurement{}, err
		}
		m.Rows += r.NumUpdatedRows
	}
	ssch, err := delta.ArrowSchema(sales.Schema)
	if err != nil {
		return measurement{}, err
	}
	recs := factsBatches(ssch, n[2], func(b *array.RecordBuilder, i int) { factsSale(b, n[0]+i, n[1]) })
	return m, appendRecords(ctx, tbl, recs)
}

// factsSetup writes the dimension and the sales source to the warehouse dir/wh and
// their Parquet copies for DuckDB: args dir facts keys [ordered] (ordered: the sales in
// time order; else their times cycle over the 30 days in sale id order).
func factsSetup(ctx context.Context, args []string) (measurement, error) {
	dir := args[0]
	nf, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	nk, err := strconv.Atoi(args[2])
	if err != nil {
		return measurement{}, err
	}
	dim, sales, _, err := factsTables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(dir, "wh")})
	if err != nil {
		return measurement{}, err
	}
	dsch, err := delta.ArrowSchema(dim.Schema)
	if err != nil {
		return measurement{}, err
	}
	open := factsTS(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	dimRecs := factsBatches(dsch, 3*nk, func(b *array.RecordBuilder, r int) {
		i, v := r/3, r%3
		b.Field(0).(*array.Int64Builder).Append(int64(r + 1))
		b.Field(1).(*array.StringBuilder).Append(factsCustomer(i))
		b.Field(2).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
		b.Field(3).(*array.StringBuilder).Append("city-" + strconv.Itoa((i+v)%1000))
		b.Field(4).(*array.StringBuilder).Append("seg-" + strconv.Itoa(i%7))
		b.Field(5).(*array.TimestampBuilder).Append(factsTS(factsBase.AddDate(0, 0, 10*v)))
		if v == 2 {
			b.Field(6).(*array.TimestampBuilder).Append(open)
		} else {
			b.Field(6).(*array.TimestampBuilder).Append(factsTS(factsBase.AddDate(0, 0, 10*v+10)))
		}
		b.Field(7).(*array.BooleanBuilder).Append(v == 2)
	})
	ssch, err := delta.ArrowSchema(sales.Schema)
	if err != nil {
		return measurement{}, err
	}
	sale := func(b *array.RecordBuilder, i int) { factsSale(b, i, nk) }
	if len(args) > 3 && args[3] == "ordered" {
		// The sales in time order, as a source loaded day by day holds them: the
		// 30 days spread evenly over the sale ids.
		step := (30 * 24 * time.Hour).Microseconds() / int64(nf)
		sale = func(b *array.RecordBuilder, i int) {
			factsSaleAt(b, i, nk, factsTS(factsBase)+arrow.Timestamp(int64(i)*step))
		}
	}
	salesRecs := factsBatches(ssch, nf, sale)
	if err := createWith(ctx, wh, dim, dimRecs); err != nil {
		return measurement{}, err
	}
	if err := createWith(ctx, wh, sales, salesRecs); err != nil {
		return measurement{}, err
	}
	if err := writeParquet(filepath.Join(dir, "dim.parquet"), dsch, dimRecs); err != nil {
		return measurement{}, err
	}
	if err := writeParquet(filepath.Join(dir, "sales.parquet"), ssch, salesRecs); err != nil {
		return measurement{}, err
	}
	return measurement{Rows: int64(nf)}, nil
}

// factsLateEvent splits the middle version of every 100th key at day 15 (the version
// ends there, a new one with another city runs to day 20), in two commits the change
// feed shows: args dir keys.
func factsLateEvent(ctx context.Context, args []string) (measurement, error) {
	nk, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	dim, _, _, err := factsTables()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(args[0], "wh")})
	if err != nil {
		return measurement{}, err
	}
	tbl, err := delta.Open(ctx, wh, dim.Path, delta.Options{})
	if err != nil {
		return measurement{}, err
	}
	split := factsBase.AddDate(0, 0, 15)
	var ids []any
	for i := 0; i < nk; i += 100 {
		ids = append(ids, factsCustomer(i))
	}
	if _, err := tbl.Update(ctx, delta.UpdateOptions{
		Where: expr.And(expr.In("customer_id", ids...), expr.Eq("valid_from", factsBase.AddDate(0, 0, 10))),
		Set:   map[string]any{"valid_to": split},
	}); err != nil {
		return measurement{}, err
	}
	dsch, err := delta.ArrowSchema(dim.Schema)
	if err != nil {
		return measurement{}, err
	}
	recs := factsBatches(dsch, len(ids), func(b *array.RecordBuilder, r int) {
		i := 100 * r
		b.Field(0).(*array.Int64Builder).Append(int64(3*nk + r + 1))
		b.Field(1).(*array.StringBuilder).Append(factsCustomer(i))
		b.Field(2).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
		b.Field(3).(*array.StringBuilder).Append("late-city")
		b.Field(4).(*array.StringBuilder).Append("seg-" + strconv.Itoa(i%7))
		b.Field(5).(*array.TimestampBuilder).Append(factsTS(split))
		b.Field(6).(*array.TimestampBuilder).Append(factsTS(factsBase.AddDate(0, 0, 20)))
		b.Field(7).(*array.BooleanBuilder).Append(false)
	})
	err = appendRecords(ctx, tbl, recs)
	return measurement{Rows: int64(len(ids))}, err
}

// factsOurs runs the timed fact_load: args dir rows.
func factsOurs(ctx context.Context, args []string) (measurement, error) {
	dim, sales, facts, err := factsTables()
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
	st := startStep()
	res, err := factsStage().Run(ctx, newEnv(wh, dim, sales, facts))
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: rows, BytesOut: res.BytesWritten,
		Note: fmt.Sprintf("%d rows written; %s", res.RowsWritten, joinNotes(res.Notes))}, nil
}

// facts runs the case: the first load (ours, DuckDB's ASOF JOIN, DuckDB's range join,
// taken in turn), a later load of the next day's facts, then the re-keying run after
// the late event.
func (d *driver) facts(ctx context.Context) error {
	dir := filepath.Join(d.work, "facts")
	nf, nk := d.cfg.factRows, d.cfg.factKeys
	if err := d.setup(ctx, "facts-setup", dir, strconv.Itoa(nf), strconv.Itoa(nk)); err != nil {
		return err
	}
	wh, setup := filepath.Join(dir, "wh"), filepath.Join(dir, "wh.setup")
	if err := os.Rename(wh, setup); err != nil {
		return err
	}
	// from makes the warehouse a fresh copy of src before each run.
	from := func(src string) func() error {
		return func() error {
			if err := os.RemoveAll(wh); err != nil {
				return err
			}
			return copyDir(src, wh)
		}
	}
	c := fmt.Sprintf("facts: first load of %s facts keyed against %s keys × 3 versions", commas(nf), commas(nk))
	var cr caseRuns
	iOurs := cr.add(d.oursRuns("ours: fact_load stage", "facts-ours", dir, strconv.Itoa(nf)))
	iAsof := cr.add(withPrep(noPrep, d.peerRuns("DuckDB ASOF JOIN over Parquet", "facts-duckdb", dir, "asof")))
	iRange := cr.add(withPrep(noPrep, d.peerRuns("DuckDB range join over Parquet", "facts-duckdb", dir, "range")))
	all := d.alternate(ctx, c, from(setup), cr.runs)
	relate(rowOf(all, iAsof), rowOf(all, iOurs), rowOf(all, iAsof), rowOf(all, iRange))
	ours := rowOf(all, iOurs)
	// share notes a later run's time as a share of the first load's.
	share := func(rows []*row) {
		if len(rows) > 0 && ours != nil && rows[0] != nil && rows[0].Error == "" && ours.Error == "" && ours.Seconds > 0 {
			rows[0].Note = fmt.Sprintf("%.1f%% of the first load's time; %s", 100*rows[0].Seconds/ours.Seconds, rows[0].Note)
		}
	}
	// The later runs start from a first load.
	if err := from(setup)(); err != nil {
		return err
	}
	if err := d.setup(ctx, "facts-ours", dir, strconv.Itoa(nf)); err != nil {
		return err
	}
	first, daily, loaded := filepath.Join(dir, "wh.first"), filepath.Join(dir, "wh.daily"), filepath.Join(dir, "wh.loaded")
	if err := copyDir(wh, first); err != nil {
		return err
	}
	// The next day's sales (1% more) appended to the source: the load reads them alone.
	if err := d.setup(ctx, "facts-append", dir, strconv.Itoa(nf), strconv.Itoa(nk), strconv.Itoa(nf/100)); err != nil {
		return err
	}
	if err := os.Rename(wh, daily); err != nil {
		return err
	}
	dc := fmt.Sprintf("facts: a later load of the next day's %s facts (the source appended to) into the %s-fact table", commas(nf/100), commas(nf))
	share(d.alternate(ctx, dc, from(daily), d.oursRuns("ours: fact_load stage", "facts-ours", dir, strconv.Itoa(nf/100))))
	// 1% of the sales updated in place and the next day's appended: the load reads the
	// source's change feed (the UPDATE rewrote every file of it).
	if err := from(first)(); err != nil {
		return err
	}
	if err := d.setup(ctx, "facts-update", dir, strconv.Itoa(nf), strconv.Itoa(nk), strconv.Itoa(nf/100)); err != nil {
		return err
	}
	changed := filepath.Join(dir, "wh.changed")
	if err := os.Rename(wh, changed); err != nil {
		return err
	}
	uc := fmt.Sprintf("facts: a later load after %s facts were updated in place and the next day's %s appended (the source's change feed on) into the %s-fact table", commas(nf/100), commas(nf/100), commas(nf))
	share(d.alternate(ctx, uc, from(changed), d.oursRuns("ours: fact_load stage", "facts-ours", dir, strconv.Itoa(nf/50))))
	// The late event after the first load.
	if err := from(first)(); err != nil {
		return err
	}
	if err := d.setup(ctx, "facts-late", dir, strconv.Itoa(nk)); err != nil {
		return err
	}
	if err := os.Rename(wh, loaded); err != nil {
		return err
	}
	// 1% of the keys, and of their facts (spread over 30 days) those in the 5 days split off.
	affected := nf / 100 / 6
	rc := fmt.Sprintf("facts: re-keying after a late event splitting 1%% of %s keys (about %s facts affected)", commas(nk), commas(affected))
	share(d.alternate(ctx, rc, from(loaded), d.oursRuns("ours: fact_load stage", "facts-ours", dir, strconv.Itoa(nf))))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// The same late event over a fact table whose sales are in time order, as a table
	// loaded day by day holds them: re-keying reads the row groups of the days it moved.
	if err := d.setup(ctx, "facts-setup", dir, strconv.Itoa(nf), strconv.Itoa(nk), "ordered"); err != nil {
		return err
	}
	for _, step := range [][]string{{"facts-ours", dir, strconv.Itoa(nf)}, {"facts-late", dir, strconv.Itoa(nk)}} {
		if err := d.setup(ctx, step...); err != nil {
			return err
		}
	}
	if err := os.Rename(wh, loaded); err != nil {
		return err
	}
	oc := fmt.Sprintf("facts: re-keying after the same late event, the %s facts in time order (about %s affected)", commas(nf), commas(affected))
	share(d.alternate(ctx, oc, from(loaded), d.oursRuns("ours: fact_load stage", "facts-ours", dir, strconv.Itoa(nf))))
	return os.RemoveAll(dir)
}
