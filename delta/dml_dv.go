package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// markDeleted is how DELETE, UPDATE and MERGE change a file of a table with deletion
// vectors: instead of rewriting the rows they keep, they mark the rows they remove (or
// whose new versions they write elsewhere). gone lists those rows by logical index (as
// scans number them: the rows the file's current vector keeps), live is how many
// logical rows the file has. It writes the new vector (the old one's rows and gone) and
// returns the add that replaces a, or nil when no row is left, so the file is only
// removed.
func markDeleted(ctx context.Context, snap *Snapshot, a *Add, gone []int64, live int64) (*Add, error) {
	if int64(len(gone)) >= live {
		return nil, nil
	}
	t := snap.Table()
	slices.Sort(gone)
	var old *roaring64.Bitmap
	if a.DeletionVector != nil {
		var err error
		if old, err = loadDeletionVector(ctx, t.Store(), t.Root(), "", a.DeletionVector); err != nil {
			return nil, fmt.Errorf("file %s: %w", a.Path, err)
		}
	}
	bm := roaring64.New()
	bm.AddMany(physicalRows(old, gone))
	if old != nil {
		bm.Or(old)
	}
	dv, err := writeDeletionVector(ctx, t.Store(), t.Root(), bm)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", a.Path, err)
	}
	na := *a
	na.DataChange = true
	na.DeletionVector = dv
	na.Stats = looseBounds(a.Stats)
	return &na, nil
}

// looseBounds marks a file's stats as no longer tight (tightBounds false): its min, max
// and null counts may describe rows a deletion vector now hides. numRecords still counts
// every row of the file.
func looseBounds(stats string) string {
	if stats == "" {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader([]byte(stats)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return stats
	}
	m["tightBounds"] = false
	b, err := json.Marshal(m)
	if err != nil {
		return stats
	}
	return string(b)
}
