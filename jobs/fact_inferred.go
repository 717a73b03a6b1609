package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Inferred members (missing: inferred). Before a run keys its new facts, it reads their
// business keys and times (only those columns) and adds to the dimension, in one commit,
// a placeholder version of every business key the dimension has no version of at all:
// the key, NULL attributes, the dimension's columns.inferred true, valid from its
// first_valid_from to the open end, current, and a new surrogate key. The facts are then
// keyed as usual and find the placeholders. The dimension's scd2_merge later fills a
// placeholder in place with the key's first real version (which starts at
// first_valid_from too), keeping its surrogate key, so facts keep theirs; later versions
// re-key the facts after them, as any dimension change does.
//
// The commit is made before the facts' and before the run reads the dimension's change
// feed, so it is one of the dimension versions the run re-keys by. It needs no txn: a
// rerun after a crash finds the placeholders and adds none. Two writers adding a key at
// once (another fact_load, or the scd2_merge inserting the key's first version) both
// allocate identity values, so one of them conflicts; this one then looks again.

// inferMembers adds the placeholders the source's new facts need to lookup d's
// dimension (missing: inferred): it returns how many it added (d.snap is then the
// dimension after the commit).
func (fr *factRun) inferMembers(ctx context.Context, env *Env, f *flow, d *factDim) (int, error) {
	for attempt := 0; attempt < delta.DefaultIdentityAttempts; attempt++ {
		if err := d.load(ctx, nil, nil); err != nil {
			return 0, err
		}
		rec, err := fr.placeholderRows(ctx, f, d)
		if err != nil || rec == nil {
			return 0, err
		}
		n := int(rec.NumRows())
		err = d.commitPlaceholders(ctx, env, rec)
		rec.Release()
		var ce *delta.ConflictError
		switch {
		case err == nil:
			return n, nil
		case !errors.As(err, &ce):
			return 0, err
		}
		if d.snap, err = d.tbl.Snapshot(ctx); err != nil {
			return 0, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
	}
	return 0, fmt.Errorf("dimension %s: add inferred members: too many concurrent commits", d.decl.Name)
}

// placeholderRows reads the business keys and times of the source's new facts (its
// snapshot, or the change feed the run read) and builds the placeholder rows (in the
// dimension's schema, the surrogate key NULL) of the keys d has no version of, each
// once, in the order first met; nil when there are none. A fact whose time is NULL or
// before first_valid_from needs none (no placeholder would cover it).
func (fr *factRun) placeholderRows(ctx context.Context, f *flow, d *factDim) (arrow.RecordBatch, error) {
	what := "source " + f.srcDecl.Name
	mb, err := d.newMemberBuilder()
	if err != nil {
		return nil, err
	}
	defer mb.b.Release()
	seen := map[string]bool{}
	var buf []byte
	// A new fact needs a placeholder when its business key (at cols[:nk]) is one d has no
	// version of, and its time (at cols[nk]) one a placeholder would cover.
	nk := len(d.factCols)
	if err := fr.eachNewFact(ctx, f, append(slices.Clone(d.factCols), d.lookup.At), func(rec arrow.RecordBatch, cols []int, r int) error {
		keyCols := cols[:nk]
		for _, c := range keyCols {
			if rec.Column(c).IsNull(r) {
				return nil
			}
		}
		t, ok, err := timeMicros(rec.Column(cols[nk]), r)
		if err != nil {
			return fmt.Errorf("%s: lookups %s.at %s: %w", what, d.decl.Name, d.lookup.At, err)
		}
		if !ok || t < d.firstFrom {
			return nil
		}
		if buf, err = keyed.AppendKey(buf[:0], rec, keyCols, r); err != nil {
			return err
		}
		if _, known := d.keys.Lookup(buf); known || seen[string(buf)] {
			return nil
		}
		seen[string(buf)] = true
		if err := mb.add(rec, keyCols, r, nil, d.firstFrom, true); err != nil {
			return fmt.Errorf("dimension %s: placeholder of %s: %w", d.decl.Name, keyText(rec, keyCols, r), err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(seen) == 0 {
		return nil, nil
	}
	return mb.b.NewRecordBatch(), nil
}

// commitPlaceholders appends the placeholder rows to the dimension, with new surrogate
// keys, in one commit on d.snap; after it d.snap is the dimension with them.
func (d *factDim) commitPlaceholders(ctx context.Context, env *Env, rec arrow.RecordBatch) error {
	tx := d.tbl.NewTransaction(d.snap, delta.TxOptions{Operation: "WRITE", Lineage: env.lineage(),
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": partitionByJSON(d.snap.PartitionColumns())}})
	withID, err := tx.AssignIdentity(rec)
	if err != nil {
		return fmt.Errorf("dimension %s: inferred members: %w", d.decl.Name, err)
	}
	defer withID.Release()
	w, err := d.snap.NewDataWriter(delta.WriteOptions{})
	if err != nil {
		return err
	}
	if err := w.Write(ctx, withID); err != nil {
		w.Abort()
		return fmt.Errorf("dimension %s: write inferred members: %w", d.decl.Name, err)
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return fmt.Errorf("dimension %s: write inferred members: %w", d.decl.Name, err)
	}
	var bytes int64
	for _, a := range adds {
		bytes += a.Size
	}
	tx.SetOperationMetrics(map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": withID.NumRows(), "numOutputBytes": bytes})
	tx.AddFiles(adds...)
	tx.ReadWholeTable()
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("dimension %s: add inferred members: %w", d.decl.Name, err)
	}
	if d.snap, err = d.tbl.Snapshot(ctx); err != nil {
		return fmt.Errorf("dimension %s: %w", d.decl.Name, err)
	}
	return nil
}
