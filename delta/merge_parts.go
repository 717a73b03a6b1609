package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// MergeInParts is one MERGE whose source is given in parts, each merged on its own and
// held in memory only while it is, and all committed at the end as ONE commit, exactly
// as a Merge of the whole source would be: the same rows, change feed, identity values
// (generated in the order the parts insert them) and operationMetrics (summed; only the
// file counts differ, as the parts write their own files). A caller whose source does not
// fit in memory cuts it so: every part says by position (MergePositions) which target
// rows its source rows match, and each target file is named by one part at most (a file
// is rewritten, spliced or marked once); unmatched rows are inserted.
//
// The change feed of a commit with change files is read from them alone, so inserted
// rows write change rows when the commit has any: give the parts that update or delete
// first, then those that only insert (Commit refuses the other order when it matters).
//
// If a part or the commit fails, nothing is committed; the files the parts wrote stay
// unreferenced, for VACUUM, as those of any failed write.
type MergeInParts struct {
	t     *Table
	tx    *Transaction
	opts  MergeOptions
	start time.Time
	out   mergeOutput
	files map[string]bool // target files named by a part so far
	// insertsWithoutChanges: a part inserted rows while no part had written change rows.
	insertsWithoutChanges bool
	done                  bool
}

// NewMergeInParts starts a MERGE in parts with the options of Merge, whose Source,
// SourceReader and Positions are given per part (MergeInParts.Merge) instead; Tx is
// required (its snapshot is the target read, and what the caller did on it is committed
// with the merge); Retries is not supported (a conflict fails Commit).
func (t *Table) NewMergeInParts(opts MergeOptions) (*MergeInParts, error) {
	if opts.Tx == nil {
		return nil, errors.New("merge in parts: MergeOptions.Tx is required")
	}
	if len(opts.Source) > 0 || opts.SourceReader != nil || opts.Positions != nil {
		return nil, errors.New("merge in parts: the source and positions are given per part")
	}
	if len(opts.WhenNotMatchedBySource) > 0 {
		return nil, errors.New("merge in parts: WHEN NOT MATCHED BY SOURCE needs the whole source at once")
	}
	opts.Positions = &MergePositions{}
	if err := t.checkMergeTx(opts.Tx, opts); err != nil {
		return nil, fmt.Errorf("merge into table %s: %w", t.displayRoot(), err)
	}
	return &MergeInParts{t: t, tx: opts.Tx, opts: opts, start: time.Now(), files: map[string]bool{},
		out: mergeOutput{res: &MergeResult{Version: opts.Tx.snap.Version()}}}, nil
}

// Merge merges one part: source rows, matched to target rows as pos says (nil or no
// files: every row is inserted). A file that an earlier part named is refused.
func (p *MergeInParts) Merge(ctx context.Context, source []arrow.RecordBatch, pos *MergePositions) error {
	if p.done {
		return errors.New("merge in parts: already committed")
	}
	if pos == nil {
		pos = &MergePositions{}
	}
	if pos.Files == nil {
		pos.Files = map[string]*FileMatches{}
	}
	for f := range pos.Files {
		if p.files[f] {
			return fmt.Errorf("merge into table %s: file %s is named by two parts", p.t.displayRoot(), f)
		}
	}
	opts := p.opts
	opts.Source, opts.Positions = source, pos
	out, err := p.t.mergeRun(ctx, p.tx, opts, p.out.cdcRows)
	if err != nil {
		return fmt.Errorf("merge into table %s: %w", p.t.displayRoot(), err)
	}
	for f := range pos.Files {
		p.files[f] = true
	}
	if out.res.NumTargetRowsInserted > 0 && p.out.cdcRows+out.cdcRows == 0 {
		p.insertsWithoutChanges = true
	}
	p.out.add(out)
	return nil
}

// Commit commits every part's work as one commit (with the options' Txn), and returns
// the summed result.
func (p *MergeInParts) Commit(ctx context.Context) (*MergeResult, error) {
	if p.done {
		return nil, errors.New("merge in parts: already committed")
	}
	p.done = true
	if p.insertsWithoutChanges && p.out.cdcRows > 0 {
		return nil, fmt.Errorf("merge into table %s: a part inserted rows before a later part wrote change rows; give the parts that update or delete first", p.t.displayRoot())
	}
	p.out.res.NumTargetFilesSkipped = int64(len(p.tx.snap.Files())) - p.out.res.NumTargetFilesScanned
	res, err := p.t.commitMerge(ctx, p.tx, p.opts, &p.out, p.start)
	if err != nil {
		return nil, fmt.Errorf("merge into table %s: %w", p.t.displayRoot(), err)
	}
	return res, nil
}

// add counts a part's output into o.
func (o *mergeOutput) add(part *mergeOutput) {
	o.adds = append(o.adds, part.adds...)
	o.cdcs = append(o.cdcs, part.cdcs...)
	o.removed = append(o.removed, part.removed...)
	o.dvAdds = append(o.dvAdds, part.dvAdds...)
	o.read = append(o.read, part.read...)
	o.cdcRows += part.cdcRows
	o.lostRowIDs = o.lostRowIDs || part.lostRowIDs
	r, s := o.res, part.res
	r.NumSourceRows += s.NumSourceRows
	r.NumTargetRowsInserted += s.NumTargetRowsInserted
	r.NumTargetRowsUpdated += s.NumTargetRowsUpdated
	r.NumTargetRowsDeleted += s.NumTargetRowsDeleted
	r.NumTargetRowsCopied += s.NumTargetRowsCopied
	r.NumTargetFilesScanned += s.NumTargetFilesScanned
	r.NumTargetRowsMatchedUpdated += s.NumTargetRowsMatchedUpdated
	r.NumTargetRowsMatchedDeleted += s.NumTargetRowsMatchedDeleted
	r.NumTargetRowsNotMatchedBySourceUpdated += s.NumTargetRowsNotMatchedBySourceUpdated
	r.NumTargetRowsNotMatchedBySourceDeleted += s.NumTargetRowsNotMatchedBySourceDeleted
	r.MaterializeSourceTimeMs += s.MaterializeSourceTimeMs
	r.ScanTimeMs += s.ScanTimeMs
	r.RewriteTimeMs += s.RewriteTimeMs
}
