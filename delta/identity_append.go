package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// DefaultIdentityAttempts bounds how often Append regenerates identity values after
// losing the race to a concurrent identity writer.
const DefaultIdentityAttempts = 20

// AppendOptions describe an append (INSERT INTO) through Table.Append.
type AppendOptions struct {
	// Records are the rows, table columns by name. They are kept (not consumed) so that a
	// retry can write them again.
	Records []arrow.RecordBatch
	// Lineage is recorded in commitInfo.
	Lineage *Lineage
	// Txn, when set, is committed in the same commit.
	Txn *Txn
	// MaxAttempts bounds the attempts when a concurrent commit conflicts (for identity
	// columns, another writer's high-water mark); default DefaultIdentityAttempts.
	MaxAttempts int
	// Write tunes the data files.
	Write WriteOptions
}

// Append writes the records as new data files in one commit (operation WRITE, mode
// Append). Identity columns the records lack (or hold only nulls in) get new values past
// the high-water mark, which is committed in the same commit's metaData; explicit
// values are refused unless the column allows them. When a concurrent writer commits
// first and conflicts (two identity writers always do), Append reloads the table,
// regenerates the values and the files, and tries again, up to MaxAttempts times; files
// of failed attempts are left for VACUUM. It returns the committed version.
func (t *Table) Append(ctx context.Context, opts AppendOptions) (int64, error) {
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultIdentityAttempts
	}
	if opts.Write.Now == nil {
		opts.Write.Now = t.opts.Now
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return -1, fmt.Errorf("append to table %s: %w", t.displayRoot(), err)
		}
		partBy, _ := json.Marshal(append([]string{}, snap.PartitionColumns()...))
		tx := t.NewTransaction(snap, TxOptions{Operation: "WRITE", Lineage: opts.Lineage,
			OperationParameters: map[string]any{"mode": "Append", "partitionBy": string(partBy)}})
		if err := t.appendTo(ctx, tx, opts); err != nil {
			return -1, fmt.Errorf("append to table %s: %w", t.displayRoot(), err)
		}
		v, err := tx.Commit(ctx)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			return v, err
		}
		lastErr = err
	}
	return -1, fmt.Errorf("append to table %s: %d attempts: %w", t.displayRoot(), attempts, lastErr)
}

// appendTo assigns identity values and writes the records' files into tx.
func (t *Table) appendTo(ctx context.Context, tx *Transaction, opts AppendOptions) error {
	snap := tx.Snapshot()
	w, err := snap.NewDataWriter(opts.Write)
	if err != nil {
		return err
	}
	var rows int64
	for _, rec := range opts.Records {
		withID, err := tx.AssignIdentity(rec)
		if err != nil {
			w.Abort()
			return err
		}
		err = w.Write(ctx, withID)
		withID.Release()
		if err != nil {
			w.Abort()
			return err
		}
		rows += rec.NumRows()
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return err
	}
	tx.AddFiles(adds...)
	var bytes int64
	for _, a := range adds {
		bytes += a.Size
	}
	tx.opts.OperationMetrics = map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": rows, "numOutputBytes": bytes}
	if opts.Txn != nil {
		tx.SetTxn(opts.Txn.AppID, opts.Txn.Version)
	}
	return nil
}
