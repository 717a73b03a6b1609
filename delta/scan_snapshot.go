package delta

import (
	"context"
	"strconv"
)

// Scan streams the snapshot's rows as Arrow records (see Scan for the options): partition
// values come from the log, files are pruned with opts.Filter, and the records have the
// snapshot's schema (or opts.Columns of it).
func (s *Snapshot) Scan(ctx context.Context, opts ScanOptions) (*Scanner, error) {
	t := s.Table()
	return Scan(ctx, t.Store(), t.Root(), s.Schema(), s.PartitionColumns(), s.Files(), opts)
}

// NewDataWriter returns a writer for new data files of this snapshot's table: its schema
// and partition columns, and delta.dataSkippingNumIndexedCols from its properties unless
// opts sets NumIndexedCols. The adds it returns go into a Transaction on this snapshot.
func (s *Snapshot) NewDataWriter(opts WriteOptions) (*DataWriter, error) {
	return s.newDataWriter(s.Schema(), opts)
}

// newDataWriter is NewDataWriter for rows of schema (the table's, or more: the
// materialized columns of row tracking).
func (s *Snapshot) newDataWriter(schema *StructType, opts WriteOptions) (*DataWriter, error) {
	if opts.NumIndexedCols == 0 {
		if v, ok := s.Metadata().Configuration["delta.dataSkippingNumIndexedCols"]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				opts.NumIndexedCols = n
				opts.NoColumnStats = n == 0
			}
		}
	}
	t := s.Table()
	return NewDataWriter(t.Store(), t.Root(), schema, s.PartitionColumns(), opts)
}

// AddedSince returns the files live in s that were not live in old, an earlier snapshot
// of the same table, and whether s only added files since: every file live in old is
// live in s with the same deletion vector (no row of old was deleted or rewritten). The
// rows of s are then those of old and those of the files added.
func (s *Snapshot) AddedSince(old *Snapshot) (added []*Add, onlyAdded bool) {
	gone, added := filesApart(old.Files(), s.Files())
	return added, len(gone) == 0
}

// ScanFiles streams the rows of files, files live in s (as Files or AddedSince return
// them), as Scan does.
func (s *Snapshot) ScanFiles(ctx context.Context, files []*Add, opts ScanOptions) (*Scanner, error) {
	t := s.Table()
	return Scan(ctx, t.Store(), t.Root(), s.Schema(), s.PartitionColumns(), files, opts)
}
