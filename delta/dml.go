package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// DeleteOptions describe a DELETE FROM table WHERE ...
type DeleteOptions struct {
	// Where selects the rows to delete (SQL semantics: rows where it is null stay);
	// nil deletes every row.
	Where expr.Predicate
	// Lineage is recorded in commitInfo.
	Lineage *Lineage
	// Txn, when set, is committed in the same commit (exactly-once progress).
	Txn *Txn
	// UserMetadata is commitInfo.userMetadata.
	UserMetadata string
	// Retries is how many times a DELETE that lost to a conflicting concurrent commit is
	// run again from the new snapshot; default 0 (the *ConflictError is returned).
	Retries int
}

// UpdateOptions describe an UPDATE table SET ... WHERE ...
type UpdateOptions struct {
	// Where selects the rows to update; nil updates every row.
	Where expr.Predicate
	// Set maps a column to its new value: a literal (nil for null), Col("other column")
	// or an ExprFunc over the rows being updated.
	Set map[string]any
	// Lineage is recorded in commitInfo.
	Lineage *Lineage
	// Txn, when set, is committed in the same commit.
	Txn *Txn
	// UserMetadata is commitInfo.userMetadata.
	UserMetadata string
	// Retries is how many times an UPDATE that lost to a conflicting concurrent commit is
	// run again from the new snapshot; default 0.
	Retries int
}

// DMLResult reports what a DELETE or UPDATE did (Spark's operationMetrics).
type DMLResult struct {
	// Version is the committed version, or the unchanged table version when nothing
	// matched and there was no Txn to record (Committed is then false).
	Version             int64
	Committed           bool
	NumRemovedFiles     int64
	NumAddedFiles       int64
	NumDeletedRows      int64
	NumUpdatedRows      int64
	NumCopiedRows       int64
	NumAddedChangeFiles int64
	NumRemovedBytes     int64
	NumAddedBytes       int64
	// NumDeletionVectorsAdded counts the files kept with a new deletion vector (tables
	// with delta.enableDeletionVectors), whose changed rows were marked, not rewritten.
	NumDeletionVectorsAdded int64
}

// Delete removes the rows matching opts.Where in one commit (copy-on-write). Only the
// files whose partition values and stats allow a match are read; a file whose rows all
// match is removed, one with some matches is rewritten without them. With the change
// feed on, deleted rows of rewritten files go to _change_data files as "delete"; files
// removed whole on their partition values alone rely on their remove (unless the commit
// has change files anyway, then their rows are written too).
func (t *Table) Delete(ctx context.Context, opts DeleteOptions) (*DMLResult, error) {
	return t.runDML(ctx, "DELETE", opts.Where, nil, opts.Lineage, opts.Txn, opts.UserMetadata, opts.Retries)
}

// Update sets columns of the rows matching opts.Where in one commit (copy-on-write).
// Files that can hold matching rows are read; those with a match are rewritten with the
// updated rows and the others copied. With the change feed on, every updated row gives
// an update_preimage and an update_postimage change row; copied rows give none.
func (t *Table) Update(ctx context.Context, opts UpdateOptions) (*DMLResult, error) {
	if len(opts.Set) == 0 {
		return nil, fmt.Errorf("update table %s: no SET assignments", t.displayRoot())
	}
	return t.runDML(ctx, "UPDATE", opts.Where, opts.Set, opts.Lineage, opts.Txn, opts.UserMetadata, opts.Retries)
}

func (t *Table) runDML(ctx context.Context, op string, where expr.Predicate, set map[string]any, lin *Lineage, txn *Txn, um string, retries int) (*DMLResult, error) {
	for attempt := 0; ; attempt++ {
		res, err := t.dml(ctx, op, where, set, lin, txn, um)
		var ce *ConflictError
		if err != nil && errors.As(err, &ce) && attempt < retries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s on table %s: %w", op, t.displayRoot(), err)
		}
		return res, nil
	}
}

func (t *Table) dml(ctx context.Context, op string, where expr.Predicate, set map[string]any, lin *Lineage, txn *Txn, um string) (*DMLResult, error) {
	start := time.Now()
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkWrite(snap.Protocol(), snap.Metadata()); err != nil {
		return nil, err
	}
	schema := snap.Schema()
	var bp *expr.Bound
	if where != nil {
		if bp, err = bindPredicate(where, schema); err != nil {
			return nil, fmt.Errorf("where: %w", err)
		}
	}
	if set != nil {
		if set, err = expr.CheckSet(set, schema); err != nil {
			return nil, err
		}
		if err := checkIdentityUpdate(schema, set); err != nil {
			return nil, err
		}
	}
	rc, err := newRowCarry(snap)
	if err != nil {
		return nil, err
	}
	w, err := newCarryingRewriter(snap, rc)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.abort()
		}
	}()

	res := &DMLResult{Version: snap.Version()}
	ch, err := t.dmlFiles(ctx, snap, w, op, bp, set, res)
	if err != nil {
		return nil, err
	}
	if ch.adds, ch.cdcs, err = w.finish(ctx); err != nil {
		return nil, err
	}
	committed = true // the writers are closed; nothing left to abort
	if len(ch.removed) == 0 && len(ch.adds) == 0 && len(ch.dvAdds) == 0 && txn == nil {
		return res, nil
	}
	params := map[string]any{"predicate": predicateParam(where)}
	if set != nil {
		params["set"] = setParam(set)
	}
	tx := t.NewTransaction(snap, TxOptions{Operation: op, OperationParameters: params, Lineage: lin, UserMetadata: um})
	if bp == nil {
		tx.ReadWholeTable()
	} else {
		tx.ReadPartitions(predicatePartitions(bp, snap.PartitionColumns()))
		tx.ReadFiles(ch.read...)
	}
	tx.RemoveAdds(ch.removed...)
	tx.AddFiles(ch.adds...)
	tx.AddFiles(ch.dvAdds...)
	tx.AddCDC(ch.cdcs...)
	if txn != nil {
		tx.SetTxn(txn.AppID, txn.Version)
	}
	tx.opts.OperationMetrics = res.metrics(op, ch, snap.DeletionVectorsEnabled(), start)
	tx.rowIDsCarried = rc.preserved()
	v, err := tx.Commit(ctx)
	if err != nil {
		return nil, err
	}
	res.Version, res.Committed = v, true
	return res, nil
}

// dmlChanges is what a DELETE or UPDATE does to the files of its snapshot.
type dmlChanges struct {
	removed []*Add   // files replaced or dropped
	read    []string // files read (conflict detection)
	dvAdds  []*Add   // files kept with a new deletion vector
	adds    []*Add   // files written
	cdcs    []*CDC   // change files written
}

// dmlFiles goes through the snapshot's files that bp may match (every file when nil):
// a DELETE on partition columns alone drops them whole, unread; any other is read and
// rewritten by rewriteFile into w, counting into res.
func (t *Table) dmlFiles(ctx context.Context, snap *Snapshot, w *rewriter, op string, bp *expr.Bound, set map[string]any, res *DMLResult) (*dmlChanges, error) {
	isPart := map[string]bool{}
	for _, c := range snap.PartitionColumns() {
		isPart[strings.ToLower(c)] = true
	}
	ch := &dmlChanges{}
	var wholeNoRead []*Add // dropped on partition values alone, not read
	partOnly := bp == nil || onlyPartitionColumns(bp, snap.PartitionColumns())
	for _, a := range snap.Files() {
		if bp != nil {
			ok, err := bp.MayMatchFile(fileFacts(a, isPart))
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", a.Path, err)
			}
			if !ok {
				continue
			}
		}
		if op == "DELETE" && partOnly {
			wholeNoRead = append(wholeNoRead, a)
			ch.removed = append(ch.removed, a)
			if n, ok := fileNumRecords(a); ok {
				res.NumDeletedRows += n
			}
			continue
		}
		ch.read = append(ch.read, a.Path)
		touched, dvAdd, err := t.rewriteFile(ctx, snap, w, a, bp, set, res)
		if err != nil {
			return nil, err
		}
		if touched {
			ch.removed = append(ch.removed, a)
		}
		if dvAdd != nil {
			ch.dvAdds = append(ch.dvAdds, dvAdd)
		}
	}
	// A commit with change files is read from them alone: rows of files dropped whole
	// must then be there too.
	if w.cdfOn() && w.cdcRows > 0 {
		for _, a := range wholeNoRead {
			if err := scanFile(ctx, snap, a, func(rec arrow.RecordBatch) error {
				return w.writeChanges(ctx, rec, ChangeDelete)
			}); err != nil {
				return nil, err
			}
		}
	}
	return ch, nil
}

// metrics counts ch's files into res and returns Spark's operationMetrics of op
// (DELETE or UPDATE); start is when the operation began.
func (res *DMLResult) metrics(op string, ch *dmlChanges, dv bool, start time.Time) map[string]int64 {
	res.NumRemovedFiles = int64(len(ch.removed))
	res.NumAddedFiles = int64(len(ch.adds))
	res.NumAddedChangeFiles = int64(len(ch.cdcs))
	res.NumDeletionVectorsAdded = int64(len(ch.dvAdds))
	for _, a := range ch.removed {
		res.NumRemovedBytes += a.Size
	}
	for _, a := range ch.adds {
		res.NumAddedBytes += a.Size
	}
	m := map[string]int64{
		"numRemovedFiles":     res.NumRemovedFiles,
		"numAddedFiles":       res.NumAddedFiles,
		"numCopiedRows":       res.NumCopiedRows,
		"numAddedChangeFiles": res.NumAddedChangeFiles,
		"numRemovedBytes":     res.NumRemovedBytes,
		"numAddedBytes":       res.NumAddedBytes,
		"executionTimeMs":     time.Since(start).Milliseconds(),
	}
	if dv {
		m["numDeletionVectorsAdded"] = res.NumDeletionVectorsAdded
	}
	if op == "DELETE" {
		m["numDeletedRows"] = res.NumDeletedRows
	} else {
		m["numUpdatedRows"] = res.NumUpdatedRows
	}
	return m
}

// rewriteFile reads one candidate file (held in memory, one file at a time) and, when
// some row matches, writes its new content and change rows; touched reports that. With
// deletion vectors on, it writes only the changed rows and returns the file again with
// a vector marking the old ones (dvAdd; nil when no row is left).
func (t *Table) rewriteFile(ctx context.Context, snap *Snapshot, w *rewriter, a *Add, bp *expr.Bound, set map[string]any, res *DMLResult) (touched bool, dvAdd *Add, err error) {
	parts, nHits, err := matchFile(ctx, snap, w.carry, a, bp)
	defer func() {
		for _, p := range parts {
			p.rec.Release()
		}
	}()
	if err != nil || nHits == 0 {
		return false, nil, err
	}
	dv := snap.DeletionVectorsEnabled()
	var gone []int64 // with dv: the changed rows' logical indexes
	var first int64  // of the current part's first row
	for _, p := range parts {
		if dv {
			for _, r := range p.hits {
				gone = append(gone, first+int64(r))
			}
			first += p.rec.NumRows()
		}
		if err := t.rewritePart(ctx, snap, w, p, !dv, set, res); err != nil {
			return false, nil, err
		}
	}
	if dv {
		if dvAdd, err = markDeleted(ctx, snap, a, gone, first); err != nil {
			return false, nil, err
		}
	}
	return true, dvAdd, nil
}

// dmlPart is a record of a file a DML statement reads: the rows the predicate matches
// (hits) and the others (rest).
type dmlPart struct {
	rec  arrow.RecordBatch
	hits []int32
	rest []int32
}

// matchFile reads a file's records (retained: the caller releases them, also on an
// error) and the rows of each that bp matches (all without bp); nHits counts them.
func matchFile(ctx context.Context, snap *Snapshot, rc *rowCarry, a *Add, bp *expr.Bound) (parts []dmlPart, nHits int64, err error) {
	err = scanFileCarry(ctx, snap, rc, a, func(rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		p := dmlPart{rec: rec}
		if bp == nil {
			p.hits = indexRange(n)
		} else {
			tri, err := bp.Eval(rec, n)
			if err != nil {
				return err
			}
			for i, r := range tri {
				if r == expr.True {
					p.hits = append(p.hits, int32(i))
				} else {
					p.rest = append(p.rest, int32(i))
				}
			}
		}
		rec.Retain()
		parts = append(parts, p)
		nHits += int64(len(p.hits))
		return nil
	})
	return parts, nHits, err
}

// rewritePart writes a part's new content: its other rows copied (when copyRest: not
// with deletion vectors), and its matched rows deleted (change rows only) or updated
// with set.
func (t *Table) rewritePart(ctx context.Context, snap *Snapshot, w *rewriter, p dmlPart, copyRest bool, set map[string]any, res *DMLResult) error {
	if len(p.rest) > 0 && copyRest {
		kept, err := takeOrAll(ctx, w.mem, p.rec, p.rest)
		if err != nil {
			return err
		}
		err = w.writeData(ctx, kept)
		kept.Release()
		if err != nil {
			return err
		}
		res.NumCopiedRows += int64(len(p.rest))
	}
	if len(p.hits) == 0 {
		return nil
	}
	hit, err := takeOrAll(ctx, w.mem, p.rec, p.hits)
	if err != nil {
		return err
	}
	if set == nil {
		err = w.writeChanges(ctx, hit, ChangeDelete)
		res.NumDeletedRows += int64(len(p.hits))
	} else {
		err = t.writeUpdated(ctx, snap, w, hit, set)
		res.NumUpdatedRows += int64(len(p.hits))
	}
	hit.Release()
	return err
}

// writeUpdated applies set to the rows of pre and writes the result, with pre and post
// images when the change feed is on.
func (t *Table) writeUpdated(ctx context.Context, snap *Snapshot, w *rewriter, pre arrow.RecordBatch, set map[string]any) error {
	post, err := applySet(w, snap.Schema(), pre, pre, set)
	if err != nil {
		return err
	}
	defer post.Release()
	data := post
	if w.carry != nil {
		data = w.carry.updated(w.mem, pre, post)
		defer data.Release()
	}
	if err := w.writeData(ctx, data); err != nil {
		return err
	}
	if err := w.writeChanges(ctx, pre, ChangeUpdatePreimage); err != nil {
		return err
	}
	return w.writeChanges(ctx, post, ChangeUpdatePostimage)
}

// applySet builds the updated rows: base's columns (table schema) with the assigned
// columns replaced by their values computed over view (same rows as base).
func applySet(w *rewriter, schema *StructType, base, view arrow.RecordBatch, set map[string]any) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(schema.Fields))
	defer arrowx.ReleaseArrays(cols)
	for i, f := range schema.Fields {
		v, ok := set[strings.ToLower(f.Name)]
		if !ok {
			c := base.Column(i)
			c.Retain()
			cols[i] = c
			continue
		}
		c, err := expr.Assign(w.mem, view, f, w.tblSch.Field(i).Type, v)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(w.tblSch, cols, base.NumRows()), nil
}

// NumRecords is the rows the file holds, from its stats (numRecords less the rows its
// deletion vector deletes); false when its stats do not say.
func (a *Add) NumRecords() (int64, bool) { return fileNumRecords(a) }

// fileNumRecords is the rows a file holds: numRecords from its stats, less those its
// deletion vector deletes.
func fileNumRecords(a *Add) (int64, bool) {
	sv := parseStatsView(a.Stats)
	if sv == nil || sv.NumRecords == nil {
		return 0, false
	}
	if a.DeletionVector != nil {
		return *sv.NumRecords - a.DeletionVector.Cardinality, true
	}
	return *sv.NumRecords, true
}

// predicateParam renders a predicate as Spark's operationParameters.predicate: a JSON
// array of condition strings.
func predicateParam(p expr.Predicate) string {
	list := []string{}
	if p != nil {
		list = append(list, p.String())
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// setParam renders assignments as a JSON object, sorted by column.
func setParam(set map[string]any) string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := make(map[string]string, len(set))
	for _, k := range keys {
		m[k] = expr.AssignmentString(set[k])
	}
	b, _ := json.Marshal(m)
	return string(b)
}
