package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestWriteStreamFiles writes with StreamFiles on the fs and mem stores: files rolled at
// the target size and the last one read back exactly; an aborted writer publishes
// nothing and leaves no temporary file.
func TestWriteStreamFiles(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	batch := func(b int) arrow.RecordBatch {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		defer rb.Release()
		for i := range 5000 {
			id := b*5000 + i
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%d-%s", id*7919, strings.Repeat("v", id%64)))
		}
		return rb.NewRecordBatch()
	}
	stores := map[string]func(t *testing.T) (objectstore.Store, string){
		"fs": func(t *testing.T) (objectstore.Store, string) {
			dir := t.TempDir()
			st, err := fs.New(fs.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return st, dir
		},
		"mem": func(t *testing.T) (objectstore.Store, string) { return mem.New(mem.Config{}), "" },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, dir := open(t)
			opts := WriteOptions{StreamFiles: true, TargetFileSize: 256 << 10, RowGroupSize: 64 << 10, MaxMemory: 256 << 10}
			w, err := NewDataWriter(st, "t", sch, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var all []arrow.RecordBatch
			for b := range 10 {
				rec := batch(b)
				defer rec.Release()
				all = append(all, rec)
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			adds, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(adds) < 2 {
				t.Errorf("%d files with a 256 KiB target, want several", len(adds))
			}
			for _, a := range adds {
				info, err := st.Stat(ctx, "t/"+a.Path)
				if err != nil || info.Size != a.Size {
					t.Errorf("file %s: stat %+v, %v; want size %d", a.Path, info, err, a.Size)
				}
			}
			got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
			diffRows(t, rowSet(t, got), rowSet(t, all))

			w, err = NewDataWriter(st, "aborted", sch, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range all[:3] {
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			w.Abort()
			if objs, err := st.List(ctx, "aborted/", ""); err != nil || len(objs) != 0 {
				t.Errorf("aborted writer left %v (%v), want nothing", objs, err)
			}
			if dir != "" {
				if left, _ := os.ReadDir(filepath.Join(dir, "aborted")); len(left) != 0 {
					t.Errorf("aborted writer left %d entries (temporary files?) on disk", len(left))
				}
			}
		})
	}
}
