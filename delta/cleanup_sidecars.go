package delta

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// deleteUnusedSidecars is the last step of log cleanup (PROTOCOL.md, Metadata Cleanup):
// it deletes the files in _delta_log/_sidecars/ that no remaining checkpoint references
// and that were written more than a day before the last UTC midnight, so that the
// sidecars of a checkpoint being written right now survive. When a checkpoint's
// references cannot be read, nothing is deleted.
func (t *Table) deleteUnusedSidecars(ctx context.Context, res *CleanupResult) error {
	dir := t.logPrefix() + sidecarDir + "/"
	infos, err := t.store.List(ctx, dir, "")
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	if len(infos) == 0 {
		return nil
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, cp := range indexLog(files).checkpoints {
		if cp.kind == kindMultiPart {
			continue // V1 spec only: no sidecars
		}
		refs, err := t.checkpointSidecars(ctx, cp.files[0].Key)
		if err != nil {
			return fmt.Errorf("sidecars of %s: %w (no sidecar deleted)", cp.files[0].Key, err)
		}
		for _, r := range refs {
			key, err := t.sidecarKey(r.Path)
			if err != nil {
				return fmt.Errorf("sidecars of %s: %w (no sidecar deleted)", cp.files[0].Key, err)
			}
			used[key] = true
		}
	}
	threshold := t.opts.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	for _, info := range infos {
		name := strings.TrimPrefix(info.Key, dir)
		if strings.Contains(name, "/") || used[info.Key] || !info.ModTime.Before(threshold) {
			continue
		}
		if err := t.store.Delete(ctx, info.Key); err != nil {
			return fmt.Errorf("delete %s: %w", info.Key, err)
		}
		res.FilesDeleted = append(res.FilesDeleted, sidecarDir+"/"+name)
	}
	return nil
}

// checkpointSidecars returns the sidecar actions of one checkpoint file, reading only its
// sidecar column when it is Parquet.
func (t *Table) checkpointSidecars(ctx context.Context, key string) ([]Sidecar, error) {
	b, err := t.getAll(ctx, key)
	if err != nil {
		return nil, err
	}
	var out []Sidecar
	if strings.HasSuffix(key, ".json") {
		acts, err := DecodeActions(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		for _, a := range acts {
			if a.Sidecar != nil {
				out = append(out, *a.Sidecar)
			}
		}
		return out, nil
	}
	pr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	sch := pr.MetaData().Schema
	var cols []int
	for i := 0; i < sch.NumColumns(); i++ {
		if p := sch.Column(i).ColumnPath(); len(p) > 0 && p[0] == "sidecar" {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 * 1024}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	rgs := make([]int, pr.NumRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	tbl, err := fr.ReadRowGroups(ctx, cols, rgs)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 64*1024)
	defer tr.Release()
	var acts []Action
	for tr.Next() {
		decodeCheckpointRecord(tr.RecordBatch(), &acts)
	}
	if err := tr.Err(); err != nil {
		return nil, err
	}
	for _, a := range acts {
		if a.Sidecar != nil {
			out = append(out, *a.Sidecar)
		}
	}
	return out, nil
}
