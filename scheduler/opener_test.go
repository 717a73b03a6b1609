package scheduler_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// TestURLOpener: a local warehouse's run records go to a store of the same directory
// written without fsync, its tables to one with; a mem:// warehouse is one store for
// both, and for every run of the process; a source directory is opened with its prefix.
func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	stores := storeurl.NewStores()
	defer stores.Close()
	o := scheduler.URLOpener{Stores: stores}
	dir := t.TempDir()
	local := &pipelines.Spec{Name: "p", Warehouse: filepath.Join(dir, "wh")}
	wh, err := o.Warehouse(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := o.Records(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	if wh == rec || wh.(*fs.Store).Dir() != rec.(*fs.Store).Dir() {
		t.Fatalf("local warehouse: tables in %v, records in %v; want two stores of one directory", wh, rec)
	}
	if again, _ := o.Warehouse(ctx, local); again != wh {
		t.Fatal("the warehouse opened twice: two stores")
	}
	inMem := &pipelines.Spec{Name: "m", Warehouse: "mem://wh"}
	mwh, err := o.Warehouse(ctx, inMem)
	if err != nil {
		t.Fatal(err)
	}
	if mrec, _ := o.Records(ctx, inMem); mrec != mwh {
		t.Fatal("mem:// warehouse: records in another store than the tables")
	}
	st, prefix, err := o.Location(ctx, inMem, "mem://wh/landing/")
	if err != nil || st != mwh || prefix != "landing" {
		t.Fatalf("Location = %v, %q, %v; want the warehouse's store and prefix landing", st, prefix, err)
	}
}
