package jobs

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// quarantineTable is a stage's quarantine table, opened (created when it does not exist
// yet) for one append: the three quarantine writers (ingest's, a merge's, a fact load's)
// read its txns to skip what they already wrote, then append with theirs.
type quarantineTable struct {
	name   string
	tbl    *delta.Table
	snap   *delta.Snapshot
	schema *arrow.Schema
}

// openQuarantine opens the declared quarantine table name at its latest version.
func openQuarantine(ctx context.Context, env *Env, name string) (*quarantineTable, error) {
	decl, err := env.declared(name)
	if err != nil {
		return nil, err
	}
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		return nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("quarantine table %s: %w", decl.Name, err)
	}
	schema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		return nil, fmt.Errorf("quarantine table %s: %w", decl.Name, err)
	}
	return &quarantineTable{name: decl.Name, tbl: tbl, snap: snap, schema: schema}, nil
}

// done is the version the txn appID records in the table (-1 and false without).
func (q *quarantineTable) done(appID string) (int64, bool) {
	v, ok := q.snap.TxnVersion(appID)
	if !ok {
		return -1, false
	}
	return v, true
}

// quarantineTxn is one txn a quarantine commit records.
type quarantineTxn struct {
	appID   string
	version int64
}

// append writes rec (rows rows of q.schema; none writes no file) and commits it with
// txns in one commit, noting "quarantined N what in TABLE".
func (q *quarantineTable) append(ctx context.Context, env *Env, rec arrow.RecordBatch, rows int, txns []quarantineTxn, what string, res *Result) error {
	var adds []*delta.Add
	if rows > 0 {
		var err error
		if adds, err = delta.WriteRecords(ctx, q.tbl.Store(), q.tbl.Root(), q.snap.Schema(), q.snap.PartitionColumns(), []arrow.RecordBatch{rec}, delta.WriteOptions{}); err != nil {
			return fmt.Errorf("write quarantine %s: %w", q.name, err)
		}
	}
	tx := q.tbl.NewTransaction(q.snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": int64(rows)},
		Lineage:             env.lineage(),
	})
	tx.AddFiles(adds...)
	for _, t := range txns {
		tx.SetTxn(t.appID, t.version)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit quarantine %s: %w", q.name, err)
	}
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: q.name, Version: v})
	res.Notes = append(res.Notes, fmt.Sprintf("quarantined %d %s in %s", rows, what, q.name))
	return nil
}
