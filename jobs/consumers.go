package jobs

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// NextVersion returns the first version of its source (src, opened in warehouse) that
// the consumer's next run reads: one after the last version its target's txn records,
// else its starting_version, else where the source's change feed starts. A vacuum that
// deletes the files of that version or a later one breaks the consumer; KeepFrom keeps
// them for the consumers it is given.
func (c Consumer) NextVersion(ctx context.Context, warehouse objectstore.Store, src *delta.Table, opts delta.Options) (int64, error) {
	env := &Env{Warehouse: warehouse, Delta: opts}
	next, err := c.nextVersion(ctx, env, src)
	if err != nil {
		return 0, fmt.Errorf("position of %s: %w", c, err)
	}
	return next, nil
}
