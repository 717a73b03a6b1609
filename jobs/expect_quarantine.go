package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// quarantinedEvent is a source row a merge's row checks set aside, with the source
// version it came from.
type quarantinedEvent struct {
	version int64
	rec     *badRecord
}

// quarantineEvents writes the change events a merge's row checks set aside to its
// quarantine table (table), in one commit before the merge's own, whose txn (appID)
// records the source version (latest) they were read through. A rerun (after a crash
// between the two commits, or a conflict) reads those events again and writes only
// those of later versions: none is quarantined twice. Nothing is committed when no
// event was set aside.
func quarantineEvents(ctx context.Context, env *Env, table, appID string, events []quarantinedEvent, latest int64, res *Result) error {
	if len(events) == 0 {
		return nil
	}
	decl, err := env.declared(table)
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
	done, ok := snap.TxnVersion(appID)
	if !ok {
		done = -1
	}
	var bad []*badRecord
	for _, e := range events {
		if e.version > done {
			bad = append(bad, e.rec)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, b := range bad {
		want[b.file] = true
	}
	schema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return err
	}
	rec, rows := quarantineRows(schema, bad, want, env.Now().UTC().Truncate(time.Microsecond))
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		return fmt.Errorf("write quarantine %s: %w", decl.Name, err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": int64(rows)},
		Lineage:             env.lineage(),
	})
	tx.AddFiles(adds...)
	tx.SetTxn(appID, latest)
	v, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit quarantine %s: %w", decl.Name, err)
	}
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: v})
	res.Notes = append(res.Notes, fmt.Sprintf("quarantined %d source rows in %s", rows, decl.Name))
	return nil
}
