package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// MergeAction is what a MERGE clause does to the rows it applies to.
type MergeAction int

// The MERGE actions: UPDATE and DELETE in WHEN MATCHED and WHEN NOT MATCHED BY SOURCE
// clauses, INSERT in WHEN NOT MATCHED clauses.
const (
	MergeUpdate MergeAction = iota + 1
	MergeDelete
	MergeInsert
)

func (a MergeAction) String() string {
	switch a {
	case MergeUpdate:
		return "update"
	case MergeDelete:
		return "delete"
	case MergeInsert:
		return "insert"
	}
	return fmt.Sprintf("MergeAction(%d)", int(a))
}

// MergeClause is one WHEN clause of a MERGE.
type MergeClause struct {
	// Cond is the clause's extra condition (WHEN MATCHED AND cond); nil is always true.
	// Columns are named "source.<col>" or "target.<col>"; an unprefixed name means the
	// only side that has it (WHEN NOT MATCHED sees only the source, WHEN NOT MATCHED BY
	// SOURCE only the target). Rows where it is null do not take the clause.
	Cond expr.Predicate
	// CondFunc, when set, is a further condition computed in Go (for what Predicate cannot
	// say, such as source.ts > target.ts): given the candidate rows (columns
	// "source.<col>" and "target.<col>", as in Cond), it returns one bool per row. A row
	// takes the clause when Cond and CondFunc both hold.
	CondFunc func(rows arrow.RecordBatch) ([]bool, error)
	// Action is MergeUpdate or MergeDelete (matched, not matched by source) or
	// MergeInsert (not matched).
	Action MergeAction
	// Set assigns target columns (literal, nil for null, Col("source.x"), Col("target.x")
	// or an ExprFunc over the "source."/"target." columns). Empty means UPDATE SET * /
	// INSERT *: every target column from the source column of the same name (identity
	// columns are never updated; on insert they are generated unless the source has
	// values). An INSERT with Set leaves unassigned columns null (identity generated).
	Set map[string]any
}

// MergeOptions describe MERGE INTO target USING source ON key equality WHEN ....
type MergeOptions struct {
	// Source rows: Source records, then every record of SourceReader. The source is held
	// in memory; with it, Parallelism target files at a time bound the merge's memory.
	Source       []arrow.RecordBatch
	SourceReader array.RecordReader
	// On lists the key columns, named alike in source and target (ON t.k = s.k AND ...).
	On []string
	// NullSafe compares keys with <=> (null equals null) instead of =.
	NullSafe bool
	// The clauses, each list tried in order; the first whose Cond holds applies.
	WhenMatched            []MergeClause
	WhenNotMatched         []MergeClause
	WhenNotMatchedBySource []MergeClause
	// Txn, when set, is committed in the same commit (exactly-once progress).
	Txn *Txn
	// Lineage is recorded in commitInfo.
	Lineage *Lineage
	// UserMetadata is commitInfo.userMetadata.
	UserMetadata string
	// Operation overrides commitInfo.operation (default "MERGE").
	Operation string
	// Parallelism is how many target files are merged at once (default GOMAXPROCS, at
	// most 4). Memory holds the source plus that many target files.
	Parallelism int
	// Retries is how many times a merge that lost to a conflicting concurrent commit is
	// run again from the new snapshot (not with Tx, whose actions the caller derived
	// from its snapshot); default 0: the *ConflictError is returned.
	Retries int
	// Tx, when set, is the transaction to merge in and commit: its snapshot is the target
	// read, and what the caller did on it first (AllocateIdentity, SetTxn, other actions)
	// is committed with the merge. Its TxOptions are replaced by the merge's.
	Tx *Transaction
	// Positions, when set, replaces the ON join: the caller has read the target snapshot
	// (Tx's) itself and says which source row matches which target row. Only the files it
	// names are read; WHEN NOT MATCHED BY SOURCE is not allowed with it.
	Positions *MergePositions
}

// MergePositions says where the matched target rows are, for a MERGE whose caller has
// already joined source and target.
type MergePositions struct {
	// Files maps the path (Add.Path) of each target file with a matched row to its
	// matches; any other file holds none.
	Files map[string]*FileMatches
}

// FileMatches pairs rows of one target file with source rows: target row Target[i] (its
// index in the file; ascending) matches source row Source[i] (its index in the source
// records, in order).
type FileMatches struct {
	Target []int64
	Source []int32
	// Rows, when set, holds the target rows Target names, in that order, in records of
	// the table's Arrow schema (a caller that scanned them kept them). On a table with
	// deletion vectors on, the MERGE then takes the rows from here and does not read the
	// file; otherwise it is ignored (the file is rewritten, so it is read whole).
	Rows []arrow.RecordBatch
}

// MergeResult reports what a MERGE did (Spark's operationMetrics).
type MergeResult struct {
	// Version is the committed version (Committed true), or the table version read when
	// the merge changed nothing and had no Txn or prepared Tx actions to commit.
	Version   int64
	Committed bool

	NumSourceRows             int64
	NumTargetRowsInserted     int64
	NumTargetRowsUpdated      int64
	NumTargetRowsDeleted      int64
	NumTargetRowsCopied       int64
	NumOutputRows             int64
	NumTargetFilesAdded       int64
	NumTargetFilesRemoved     int64
	NumTargetChangeFilesAdded int64
	// NumTargetFilesScanned counts the target files read; the others were skipped by
	// partition values and key stats.
	NumTargetFilesScanned int64
	NumTargetFilesSkipped int64
	// Per-clause-kind counts, as Spark reports them.
	NumTargetRowsMatchedUpdated            int64
	NumTargetRowsMatchedDeleted            int64
	NumTargetRowsNotMatchedBySourceUpdated int64
	NumTargetRowsNotMatchedBySourceDeleted int64
	NumTargetBytesAdded                    int64
	NumTargetBytesRemoved                  int64
	// Deletion vectors, as Spark counts them (tables with delta.enableDeletionVectors):
	// Added counts the target files that kept their data and got a new deletion vector,
	// Removed the target files removed or given a new vector that had one, Updated the
	// files that had a vector and got a new one (so counted in both).
	NumTargetDeletionVectorsAdded   int64
	NumTargetDeletionVectorsRemoved int64
	NumTargetDeletionVectorsUpdated int64
	// Times in milliseconds: loading the source (MaterializeSourceTimeMs); the pass over
	// the target files, reading them, finding the matches and writing the files they
	// change, which happens as they are read (ScanTimeMs); writing the inserted rows and
	// finishing the new files, spliced ones included (RewriteTimeMs); the whole MERGE
	// (ExecutionTimeMs).
	MaterializeSourceTimeMs int64
	ScanTimeMs              int64
	RewriteTimeMs           int64
	ExecutionTimeMs         int64
}

// ErrMultipleSourceRowsMatched is wrapped when several source rows match one target row
// (Spark: "multiple source rows matched and attempted to modify the same target row").
var ErrMultipleSourceRowsMatched = errors.New("multiple source rows matched and attempted to modify the same target row")

// Merge runs a MERGE in one commit. Target files are pruned by their partition values and
// the min/max stats of the key columns against the source keys (unless a WHEN NOT
// MATCHED BY SOURCE clause needs them), then read one at a time; a file where some row is
// updated or deleted is rewritten (its other rows copied), the others are left alone.
// Unmatched source rows are inserted last. With the change feed on, updated rows give
// update_preimage/update_postimage change rows, deleted rows delete, and, when the commit
// has change files, inserted rows insert; copied rows never appear. Failing at any point
// before the commit leaves the table unchanged; a concurrent commit that added or removed
// files the merge depends on makes it fail with a *ConflictError (see Retries).
func (t *Table) Merge(ctx context.Context, opts MergeOptions) (*MergeResult, error) {
	if opts.SourceReader != nil {
		// Read the source once: a retry merges the same rows again.
		recs := append([]arrow.RecordBatch(nil), opts.Source...)
		var owned []arrow.RecordBatch
		defer func() {
			for _, r := range owned {
				r.Release()
			}
		}()
		for opts.SourceReader.Next() {
			r := opts.SourceReader.RecordBatch()
			r.Retain()
			owned = append(owned, r)
			recs = append(recs, r)
		}
		if err := opts.SourceReader.Err(); err != nil {
			return nil, fmt.Errorf("merge into table %s: read source: %w", t.displayRoot(), err)
		}
		opts.Source, opts.SourceReader = recs, nil
	}
	for attempt := 0; ; attempt++ {
		res, err := t.merge(ctx, opts)
		var ce *ConflictError
		if err != nil && errors.As(err, &ce) && opts.Tx == nil && attempt < opts.Retries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("merge into table %s: %w", t.displayRoot(), err)
		}
		return res, nil
	}
}

func (t *Table) merge(ctx context.Context, opts MergeOptions) (*MergeResult, error) {
	start := time.Now()
	tx := opts.Tx
	if tx == nil {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		tx = t.NewTransaction(snap, TxOptions{})
	}
	if err := t.checkMergeTx(tx, opts); err != nil {
		return nil, err
	}
	out, err := t.mergeRun(ctx, tx, opts, 0)
	if err != nil {
		return nil, err
	}
	return t.commitMerge(ctx, tx, opts, out, start)
}

// checkMergeTx checks that tx (the transaction a merge runs in) and opts go together.
func (t *Table) checkMergeTx(tx *Transaction, opts MergeOptions) error {
	if tx.table != t || tx.snap == nil {
		return errors.New("MergeOptions.Tx belongs to another table")
	}
	if opts.Positions != nil && len(opts.WhenNotMatchedBySource) > 0 {
		return errors.New("MergeOptions.Positions cannot be used with WHEN NOT MATCHED BY SOURCE")
	}
	return checkWrite(tx.snap.Protocol(), tx.snap.Metadata())
}

// mergeOutput is what a merge (or one part of it, MergeInParts) wrote and read, for
// its commit.
type mergeOutput struct {
	res      *MergeResult
	adds     []*Add // data files written (rewritten, spliced, inserted rows)
	cdcs     []*CDC
	removed  []*Add // target files replaced
	dvAdds   []*Add // target files kept with a new deletion vector
	read     []string
	partPred PartitionPredicate // the partitions a key-join merge read (nil: the whole table)
	cdcRows  int64              // change rows written
	// lostRowIDs says some row copied or updated did not keep its row id (rowCarry).
	lostRowIDs bool
}

// mergeRun runs a merge's reads and writes on tx's snapshot, without committing.
// cdcBefore counts the change rows earlier parts of the same commit wrote (inserted
// rows then write change rows too).
func (t *Table) mergeRun(ctx context.Context, tx *Transaction, opts MergeOptions, cdcBefore int64) (*mergeOutput, error) {
	snap := tx.snap
	plan, err := planMerge(snap, opts)
	if err != nil {
		return nil, err
	}
	loading := time.Now()
	src, err := loadSource(ctx, snap, opts, plan)
	if err != nil {
		return nil, err
	}
	defer src.release()
	parallel := opts.Parallelism
	if parallel <= 0 {
		parallel = min(runtime.GOMAXPROCS(0), 4)
	}
	m := &merger{t: t, snap: snap, tx: tx, plan: plan, src: src, pos: opts.Positions, parallel: parallel, matched: make([]bool, src.n),
		res: &MergeResult{Version: snap.Version(), NumSourceRows: src.n}, workerChangeRows: cdcBefore}
	m.res.MaterializeSourceTimeMs = time.Since(loading).Milliseconds()
	m.dv = snap.DeletionVectorsEnabled()
	m.splices = newSpliceGroup(ctx, parallel)
	rc, err := newRowCarry(snap)
	if err != nil {
		return nil, err
	}
	m.w, err = newCarryingRewriter(snap, rc)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			m.splices.wait()
			m.stopChanges()
			m.w.abort()
		}
	}()
	m.startChanges(ctx)
	scanning := time.Now()
	if err := m.scanTargets(ctx); err != nil {
		return nil, err
	}
	writing := time.Now()
	m.res.ScanTimeMs = writing.Sub(scanning).Milliseconds()
	if err := m.insert(ctx); err != nil {
		return nil, err
	}
	spliced, err := m.splices.wait()
	if err != nil {
		return nil, err
	}
	cdcRows := m.changeRowsSent + m.workerChangeRows - cdcBefore
	if err := m.stopChanges(); err != nil {
		return nil, err
	}
	adds, cdcs, err := m.w.finish(ctx)
	if err != nil {
		return nil, err
	}
	closed = true
	m.res.RewriteTimeMs = time.Since(writing).Milliseconds()
	out := &mergeOutput{res: m.res, adds: append(append(adds, m.workerAdds...), spliced...), cdcs: append(cdcs, m.workerChangeFiles...),
		removed: m.removed, dvAdds: m.dvAdds, read: m.read, cdcRows: cdcRows, lostRowIDs: !m.w.carry.preserved()}
	if len(opts.WhenNotMatchedBySource) == 0 && opts.Positions == nil {
		out.partPred = src.partitionPredicate(plan, snap)
	}
	return out, nil
}

// commitMerge commits what a merge wrote (out) in tx, with its operationMetrics; a merge
// that changed nothing and has no Txn or prepared Tx commits nothing.
func (t *Table) commitMerge(ctx context.Context, tx *Transaction, opts MergeOptions, out *mergeOutput, start time.Time) (*MergeResult, error) {
	res, adds, cdcs := out.res, out.adds, out.cdcs
	if len(out.removed) == 0 && len(adds) == 0 && len(out.dvAdds) == 0 && opts.Txn == nil && opts.Tx == nil {
		return res, nil
	}
	op := opts.Operation
	if op == "" {
		op = "MERGE"
	}
	tx.opts.Operation = op
	tx.opts.Lineage = opts.Lineage
	tx.opts.UserMetadata = opts.UserMetadata
	tx.opts.OperationParameters = mergeParams(opts)
	if out.partPred == nil {
		tx.ReadWholeTable()
	} else {
		tx.ReadPartitions(out.partPred)
	}
	tx.ReadFiles(out.read...)
	tx.RemoveAdds(out.removed...)
	tx.AddFiles(adds...)
	tx.AddFiles(out.dvAdds...)
	tx.AddCDC(cdcs...)
	if opts.Txn != nil {
		tx.SetTxn(opts.Txn.AppID, opts.Txn.Version)
	}
	res.NumTargetFilesAdded = int64(len(adds))
	res.NumTargetFilesRemoved = int64(len(out.removed))
	res.NumTargetChangeFilesAdded = int64(len(cdcs))
	res.NumOutputRows = res.NumTargetRowsInserted + res.NumTargetRowsUpdated + res.NumTargetRowsCopied
	hadVector := map[string]bool{}
	for _, a := range out.removed {
		res.NumTargetBytesRemoved += a.Size
		if a.DeletionVector != nil {
			hadVector[a.Path] = true
		}
	}
	for _, a := range adds {
		res.NumTargetBytesAdded += a.Size
	}
	res.NumTargetDeletionVectorsAdded = int64(len(out.dvAdds))
	res.NumTargetDeletionVectorsRemoved = int64(len(hadVector))
	for _, a := range out.dvAdds {
		if hadVector[a.Path] {
			res.NumTargetDeletionVectorsUpdated++
		}
	}
	res.ExecutionTimeMs = time.Since(start).Milliseconds()
	tx.opts.OperationMetrics = res.operationMetrics()
	tx.rowIDsCarried = !out.lostRowIDs
	v, err := tx.Commit(ctx)
	if err != nil {
		return nil, err
	}
	res.Version, res.Committed = v, true
	return res, nil
}

// operationMetrics are the MERGE's operationMetrics, with the keys Delta-Spark writes.
func (res *MergeResult) operationMetrics() map[string]int64 {
	return map[string]int64{
		"numSourceRows":                          res.NumSourceRows,
		"numTargetRowsInserted":                  res.NumTargetRowsInserted,
		"numTargetRowsUpdated":                   res.NumTargetRowsUpdated,
		"numTargetRowsDeleted":                   res.NumTargetRowsDeleted,
		"numTargetRowsCopied":                    res.NumTargetRowsCopied,
		"numOutputRows":                          res.NumOutputRows,
		"numTargetFilesAdded":                    res.NumTargetFilesAdded,
		"numTargetFilesRemoved":                  res.NumTargetFilesRemoved,
		"numTargetChangeFilesAdded":              res.NumTargetChangeFilesAdded,
		"numTargetRowsMatchedUpdated":            res.NumTargetRowsMatchedUpdated,
		"numTargetRowsMatchedDeleted":            res.NumTargetRowsMatchedDeleted,
		"numTargetRowsNotMatchedBySourceUpdated": res.NumTargetRowsNotMatchedBySourceUpdated,
		"numTargetRowsNotMatchedBySourceDeleted": res.NumTargetRowsNotMatchedBySourceDeleted,
		"numTargetBytesAdded":                    res.NumTargetBytesAdded,
		"numTargetBytesRemoved":                  res.NumTargetBytesRemoved,
		"numTargetDeletionVectorsAdded":          res.NumTargetDeletionVectorsAdded,
		"numTargetDeletionVectorsRemoved":        res.NumTargetDeletionVectorsRemoved,
		"numTargetDeletionVectorsUpdated":        res.NumTargetDeletionVectorsUpdated,
		"materializeSourceTimeMs":                res.MaterializeSourceTimeMs,
		"scanTimeMs":                             res.ScanTimeMs,
		"rewriteTimeMs":                          res.RewriteTimeMs,
		"executionTimeMs":                        res.ExecutionTimeMs,
	}
}

// mergePlan is the MERGE resolved against the target schema and the source schema.
type mergePlan struct {
	schema    *StructType // target
	keys      []string    // target spelling
	keyIdx    []int       // target field index of each key
	nullSafe  bool
	matched   []boundClause
	notMatch  []boundClause
	bySource  []boundClause
	onlyDel   bool        // the only matched clause is an unconditional DELETE (duplicates allowed)
	viewM     *StructType // "target.*" + "source.*" fields, for matched clauses
	viewS     *StructType // "source.*"
	viewT     *StructType // "target.*"
	srcFields []*StructField
}

type boundClause struct {
	MergeClause
	cond *expr.Bound    // over the clause's view
	tcnd *expr.Bound    // not-matched-by-source cond over the table schema (file pruning)
	set  map[string]any // lower-case target column -> value; nil for *-forms
}

func planMerge(snap *Snapshot, opts MergeOptions) (*mergePlan, error) {
	schema := snap.Schema()
	if len(opts.On) == 0 {
		return nil, errors.New("no key columns (On)")
	}
	if len(opts.WhenMatched)+len(opts.WhenNotMatched)+len(opts.WhenNotMatchedBySource) == 0 {
		return nil, errors.New("no WHEN clauses")
	}
	p := &mergePlan{schema: schema, nullSafe: opts.NullSafe}
	for _, k := range opts.On {
		i := schema.FieldIndex(k)
		if i < 0 {
			return nil, fmt.Errorf("key column %s is not in the target table", k)
		}
		p.keys = append(p.keys, schema.Fields[i].Name)
		p.keyIdx = append(p.keyIdx, i)
	}
	p.onlyDel = len(opts.WhenMatched) == 1 && opts.WhenMatched[0].Action == MergeDelete && opts.WhenMatched[0].Cond == nil
	return p, nil
}

// prefixed returns the fields of st renamed "<side>.<name>".
func prefixed(side string, st *StructType) []*StructField {
	out := make([]*StructField, len(st.Fields))
	for i, f := range st.Fields {
		g := *f
		g.Name = side + "." + f.Name
		g.Nullable = true
		out[i] = &g
	}
	return out
}

// bindClauses resolves the clauses once the source schema is known.
func (p *mergePlan) bindClauses(opts MergeOptions, srcSchema *StructType) error {
	p.srcFields = srcSchema.Fields
	p.viewT = &StructType{Fields: prefixed("target", p.schema)}
	p.viewS = &StructType{Fields: prefixed("source", srcSchema)}
	p.viewM = &StructType{Fields: append(append([]*StructField(nil), p.viewT.Fields...), p.viewS.Fields...)}
	bind := func(cs []MergeClause, kind string, view *StructType, sides []string) ([]boundClause, error) {
		var out []boundClause
		for i, c := range cs {
			bc := boundClause{MergeClause: c}
			switch {
			case kind == "not matched" && c.Action != MergeInsert,
				kind != "not matched" && c.Action != MergeUpdate && c.Action != MergeDelete:
				return nil, fmt.Errorf("WHEN %s clause %d: action %s is not allowed there", strings.ToUpper(kind), i+1, c.Action)
			}
			if kind == "not matched by source" && c.Action == MergeUpdate && len(c.Set) == 0 {
				return nil, fmt.Errorf("WHEN NOT MATCHED BY SOURCE clause %d: UPDATE needs Set (there is no source row)", i+1)
			}
			if c.Cond != nil {
				q, err := qualify(c.Cond, sides, p.schema, srcSchema)
				if err != nil {
					return nil, fmt.Errorf("WHEN %s clause %d: %w", strings.ToUpper(kind), i+1, err)
				}
				if bc.cond, err = bindPredicate(q, view); err != nil {
					return nil, fmt.Errorf("WHEN %s clause %d: %w", strings.ToUpper(kind), i+1, err)
				}
				if kind == "not matched by source" {
					bc.tcnd, _ = bindPredicate(expr.Rename(q, func(s string) string { return strings.TrimPrefix(s, "target.") }), p.schema)
				}
			}
			if len(c.Set) > 0 && c.Action != MergeDelete {
				set, err := expr.CheckSet(c.Set, p.schema)
				if err != nil {
					return nil, fmt.Errorf("WHEN %s clause %d: %w", strings.ToUpper(kind), i+1, err)
				}
				if c.Action == MergeUpdate {
					if err := checkIdentityUpdate(p.schema, set); err != nil {
						return nil, err
					}
				}
				bc.set = set
			}
			out = append(out, bc)
		}
		return out, nil
	}
	var err error
	if p.matched, err = bind(opts.WhenMatched, "matched", p.viewM, []string{"target", "source"}); err != nil {
		return err
	}
	if p.notMatch, err = bind(opts.WhenNotMatched, "not matched", p.viewS, []string{"source"}); err != nil {
		return err
	}
	if p.bySource, err = bind(opts.WhenNotMatchedBySource, "not matched by source", p.viewT, []string{"target"}); err != nil {
		return err
	}
	for _, c := range p.matched {
		if c.Action == MergeUpdate && c.set == nil {
			if err := p.checkSourceHasAll("UPDATE SET *"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSourceHasAll: the *-forms need every (non-identity) target column in the source.
func (p *mergePlan) checkSourceHasAll(form string) error {
	for _, f := range p.schema.Fields {
		if _, isID, _ := IdentityField(f); isID {
			continue
		}
		found := false
		for _, s := range p.srcFields {
			if strings.EqualFold(s.Name, f.Name) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: target column %s is not in the source", form, f.Name)
		}
	}
	return nil
}

// qualify prefixes unprefixed columns with the only side among sides that has them.
func qualify(p expr.Predicate, sides []string, target, source *StructType) (expr.Predicate, error) {
	var err error
	out := expr.Rename(p, func(c string) string {
		lc := strings.ToLower(c)
		if strings.HasPrefix(lc, "source.") || strings.HasPrefix(lc, "target.") {
			return strings.ToLower(c[:6]) + c[6:]
		}
		var hits []string
		for _, s := range sides {
			st := target
			if s == "source" {
				st = source
			}
			if st.Field(c) != nil {
				hits = append(hits, s)
			}
		}
		switch len(hits) {
		case 1:
			return hits[0] + "." + c
		case 0:
			err = fmt.Errorf("column %s is in neither %s", c, strings.Join(sides, " nor "))
		default:
			err = fmt.Errorf("column %s is ambiguous: write source.%s or target.%s", c, c, c)
		}
		return c
	})
	return out, err
}

// mergeParams renders Spark's MERGE operationParameters.
func mergeParams(opts MergeOptions) map[string]any {
	conds := make([]string, len(opts.On))
	for i, k := range opts.On {
		op := "="
		if opts.NullSafe {
			op = "<=>"
		}
		conds[i] = fmt.Sprintf("target.%s %s source.%s", k, op, k)
	}
	clauses := func(cs []MergeClause) string {
		list := []map[string]string{}
		for _, c := range cs {
			m := map[string]string{"actionType": c.Action.String()}
			switch {
			case c.Cond != nil && c.CondFunc != nil:
				m["predicate"] = c.Cond.String() + " AND <function>"
			case c.Cond != nil:
				m["predicate"] = c.Cond.String()
			case c.CondFunc != nil:
				m["predicate"] = "<function>"
			}
			list = append(list, m)
		}
		b, _ := json.Marshal(list)
		return string(b)
	}
	return map[string]any{
		"predicate":                    predicateString(strings.Join(conds, " AND ")),
		"matchedPredicates":            clauses(opts.WhenMatched),
		"notMatchedPredicates":         clauses(opts.WhenNotMatched),
		"notMatchedBySourcePredicates": clauses(opts.WhenNotMatchedBySource),
	}
}

func predicateString(s string) string {
	b, _ := json.Marshal([]string{s})
	return string(b)
}
