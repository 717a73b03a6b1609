package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// upsertFiles merges each new file into the table by the keys, one commit per file in name
// order, each with the file's txn: rows whose key exists replace it (an update in the
// change feed), new keys are inserted, and rows matching delete_when delete their key.
func (s *Ingest) upsertFiles(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, res *Result) error {
	var deleteWhen delta.Predicate
	var extra []string
	if s.cfg.DeleteWhen != "" {
		p, err := delta.ParsePredicate(s.cfg.DeleteWhen)
		if err != nil {
			return fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		deleteWhen = p
		extra = predicateColumns(p)
	}
	for _, f := range files {
		// Each file is merged on the version read here: loaded meanwhile (by a concurrent
		// run), it is skipped; loaded later, the commit conflicts (and Run runs again).
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return err
		}
		if v, ok := snap.TxnVersion(f.ID); ok && (!isURL(f.Name) || v == f.Version) {
			res.Notes = append(res.Notes, f.Name+": already loaded")
			continue
		}
		var recs []arrow.RecordBatch
		release := func() {
			for _, r := range recs {
				r.Release()
			}
		}
		// Rows count as written as they are decoded: a failure leaves this file's out.
		committed := res.RowsWritten
		fail := func(err error) error {
			release()
			res.RowsWritten = committed
			return err
		}
		bad, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, extra, func(rec arrow.RecordBatch) error {
			rec.Retain()
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return fail(err)
		}
		if err := s.quarantine(ctx, env, []*sourceFile{f}, bad, loadTime, res); err != nil {
			return fail(err)
		}
		lineage := env.lineage()
		lineage.SourceFiles = []string{f.Name}
		opts := delta.MergeOptions{
			Source:         recs,
			On:             s.cfg.Keys,
			NullSafe:       true,
			WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate}},
			WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
			Txn:            &delta.Txn{AppID: f.ID, Version: f.Version},
			Tx:             tbl.NewTransaction(snap, delta.TxOptions{}),
			Lineage:        lineage,
		}
		if deleteWhen != nil {
			opts.WhenMatched = []delta.MergeClause{{Cond: deleteWhen, Action: delta.MergeDelete}, {Action: delta.MergeUpdate}}
			opts.WhenNotMatched = []delta.MergeClause{{Cond: notPredicate(deleteWhen), Action: delta.MergeInsert}}
		}
		mr, err := tbl.Merge(ctx, opts)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", f.Name, err))
		}
		release()
		res.FilesWritten += mr.NumTargetFilesAdded
		res.BytesWritten += mr.NumTargetBytesAdded
		if mr.Committed {
			res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: mr.Version})
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %d inserted, %d updated, %d deleted", f.Name, mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
	}
	return nil
}

// predicateColumns lists the columns a predicate reads.
func predicateColumns(p delta.Predicate) []string {
	switch p := p.(type) {
	case *delta.Comparison:
		return []string{p.Column}
	case *delta.InList:
		return []string{p.Column}
	case *delta.NullCheck:
		return []string{p.Column}
	case *delta.AndPredicate:
		var out []string
		for _, t := range p.Terms {
			out = append(out, predicateColumns(t)...)
		}
		return out
	case *delta.OrPredicate:
		var out []string
		for _, t := range p.Terms {
			out = append(out, predicateColumns(t)...)
		}
		return out
	}
	return nil
}

// notPredicate is NOT p in two-valued logic over the predicates ParsePredicate makes:
// a row where p is null (unknown) counts as not matching it.
func notPredicate(p delta.Predicate) delta.Predicate {
	switch p := p.(type) {
	case *delta.Comparison:
		neg := map[delta.Op]delta.Op{delta.OpEq: delta.OpNe, delta.OpNe: delta.OpEq, delta.OpLt: delta.OpGe, delta.OpGe: delta.OpLt, delta.OpGt: delta.OpLe, delta.OpLe: delta.OpGt}
		return delta.Or(&delta.Comparison{Column: p.Column, Op: neg[p.Op], Value: p.Value}, delta.IsNull(p.Column))
	case *delta.NullCheck:
		return &delta.NullCheck{Column: p.Column, Not: !p.Not}
	case *delta.AndPredicate:
		terms := make([]delta.Predicate, len(p.Terms))
		for i, t := range p.Terms {
			terms[i] = notPredicate(t)
		}
		return delta.Or(terms...)
	case *delta.OrPredicate:
		terms := make([]delta.Predicate, len(p.Terms))
		for i, t := range p.Terms {
			terms[i] = notPredicate(t)
		}
		return delta.And(terms...)
	case *delta.InList:
		terms := make([]delta.Predicate, len(p.Values))
		for i, v := range p.Values {
			terms[i] = delta.Ne(p.Column, v)
		}
		return delta.Or(delta.IsNull(p.Column), delta.And(terms...))
	}
	return p
}
