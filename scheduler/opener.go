package scheduler

import (
	"context"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// URLOpener is the Opener (and RecordsOpener) of a process: it opens the locations a
// pipeline names through Stores, which the process holds and closes, so that each
// warehouse is opened once and a mem:// warehouse is one store for all of the process's
// runs. Flags are the command line's S3 settings, over each pipeline's storage section.
type URLOpener struct {
	Stores *storeurl.Stores
	Flags  storeurl.Options
}

var (
	_ Opener        = URLOpener{}
	_ RecordsOpener = URLOpener{}
)

func (o URLOpener) options(spec *pipelines.Spec) storeurl.Options {
	return o.Flags.Over(spec.Storage.StoreOptions())
}

// Warehouse opens the pipeline's warehouse.
func (o URLOpener) Warehouse(ctx context.Context, spec *pipelines.Spec) (objectstore.Store, error) {
	return o.Stores.Open(ctx, spec.Warehouse, o.options(spec))
}

// Records opens where the pipeline's run records go: a local warehouse's directory
// written without fsync (a machine crash may lose the latest records, never table
// data); on S3 and mem the warehouse's store itself.
func (o URLOpener) Records(ctx context.Context, spec *pipelines.Spec) (objectstore.Store, error) {
	opts := o.options(spec)
	opts.NoSync = true
	return o.Stores.Open(ctx, spec.Warehouse, opts)
}

// Location opens a source directory of the pipeline (storeurl.Stores.Dir).
func (o URLOpener) Location(ctx context.Context, spec *pipelines.Spec, location string) (objectstore.Store, string, error) {
	return o.Stores.Dir(ctx, location, o.options(spec))
}
