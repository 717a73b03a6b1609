package delta

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// SchemaVersion is a version of a table whose commit changed its schema: the first
// version the log holds (the table's creation, when the log starts at 0), then each
// commit whose metaData changed a column, the partitioning or turned column mapping on.
type SchemaVersion struct {
	Version int64
	// Timestamp is the commit timestamp time travel uses (as HistoryEntry's).
	Timestamp time.Time
	Operation string
	UserName  string
	// Lineage is the pipeline, stage and run that made the change (nil for commits of
	// other engines, and for commands run outside a run, such as table alter).
	Lineage *Lineage
	// Schema, PartitionColumns and ColumnMapping ("none", "name" or "id") are the
	// table's from this version on.
	Schema           *StructType
	PartitionColumns []string
	ColumnMapping    string
	// First says that this is the schema the log starts with: the table as created
	// (Version 0) or as the earliest version the log still holds; Changes is empty then.
	First   bool
	Changes []SchemaChange
}

// SchemaHistory lists the versions that changed the table's schema, oldest first,
// up to the latest version. It reads every commit the log holds (several at once) and
// parses only the schemas of commits that carry metaData.
func (t *Table) SchemaHistory(ctx context.Context) ([]SchemaVersion, error) {
	out, err := t.schemaHistory(ctx, -1, -1)
	if err != nil {
		return nil, fmt.Errorf("schema history of table %s: %w", t.displayRoot(), err)
	}
	return out, nil
}

// SchemaHistoryBetween is SchemaHistory over versions from to to: the schema at from
// (First), then each version after it, up to to, that changed the schema. It reads the
// commits of that range only. A negative from is the earliest version the log holds;
// a to past the latest version is the latest.
func (t *Table) SchemaHistoryBetween(ctx context.Context, from, to int64) ([]SchemaVersion, error) {
	if from >= 0 && to < from {
		return nil, fmt.Errorf("schema history of table %s: no versions from %d to %d", t.displayRoot(), from, to)
	}
	out, err := t.schemaHistory(ctx, max(from, -1), to)
	if err != nil {
		return nil, fmt.Errorf("schema history of table %s, versions %d to %d: %w", t.displayRoot(), from, to, err)
	}
	return out, nil
}

// schemaHistory lists the schema changes of versions from to to (-1: the earliest the
// log holds, the latest).
func (t *Table) schemaHistory(ctx context.Context, from, to int64) ([]SchemaVersion, error) {
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if to < 0 || to > latest.version {
		to = latest.version
	}
	cl, err := t.changeLog(ctx, latest)
	if err != nil {
		return nil, err
	}
	first := max(cl.earliest, cl.commits[0].version)
	if from >= 0 {
		if _, ok := cl.byVersion[from]; !ok || from < first {
			return nil, fmt.Errorf("%w: version %d is not in the log (it holds versions %d to %d)", ErrVersionCleaned, from, first, latest.version)
		}
		first = from
	}
	base, err := t.SnapshotAt(ctx, first)
	if err != nil {
		return nil, err
	}
	stamp := func(v int64) time.Time { return time.UnixMilli(cl.stamps[cl.byVersion[v]]).UTC() }
	cur := SchemaVersion{Version: first, Timestamp: stamp(first), Schema: base.Schema(), First: true,
		PartitionColumns: base.PartitionColumns(), ColumnMapping: columnMappingMode(base.Metadata())}
	mdSeen, prevSchema := base.Metadata(), base.Schema()
	var out []SchemaVersion
	err = t.forEachMetadataCommit(ctx, first, to, func(v int64, acts []Action) error {
		var md *Metadata
		for i := range acts {
			if acts[i].MetaData != nil {
				md = acts[i].MetaData
			}
		}
		ci := findCommitInfo(acts)
		if v == first {
			cur.Operation, cur.UserName, cur.Lineage = commitWho(ci)
			out = append(out, cur)
			return nil
		}
		if md == nil || md.SchemaString == mdSeen.SchemaString && slices.Equal(md.PartitionColumns, mdSeen.PartitionColumns) &&
			columnMappingMode(md) == columnMappingMode(mdSeen) {
			return nil
		}
		st, err := ParseSchema(md.SchemaString)
		if err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
		prev := out[len(out)-1]
		sv := SchemaVersion{Version: v, Timestamp: stamp(v), Schema: st, PartitionColumns: md.PartitionColumns, ColumnMapping: columnMappingMode(md)}
		sv.Operation, sv.UserName, sv.Lineage = commitWho(ci)
		if sv.ColumnMapping != prev.ColumnMapping {
			sv.Changes = append(sv.Changes, SchemaChange{Kind: ColumnMappingOn, From: prev.ColumnMapping, To: sv.ColumnMapping})
		}
		sv.Changes = append(sv.Changes, DiffSchemas(prevSchema, st)...)
		if !slices.EqualFunc(prev.PartitionColumns, sv.PartitionColumns, strings.EqualFold) {
			sv.Changes = append(sv.Changes, SchemaChange{Kind: PartitionsChanged,
				From: strings.Join(prev.PartitionColumns, ", "), To: strings.Join(sv.PartitionColumns, ", ")})
		}
		mdSeen, prevSchema = md, st
		if len(sv.Changes) == 0 { // metadata beside the definitions changed (an identity's high-water mark)
			return nil
		}
		out = append(out, sv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func commitWho(ci *CommitInfo) (op, user string, lineage *Lineage) {
	if ci == nil {
		return "", "", nil
	}
	return ci.Operation, ci.UserName, ci.Orchestrator
}

// metaDataKey is how a commit file spells a metaData action (writers write keys as they
// are, without escapes); a commit without it changed no metadata.
var metaDataKey = []byte(`"metaData"`)

// forEachMetadataCommit calls fn, in version order, for version from and for each
// version up to to whose commit holds a metaData action. Commits are read several at
// once, and only those that may hold metadata are decoded (most commits add files,
// whose statistics dominate decoding).
func (t *Table) forEachMetadataCommit(ctx context.Context, from, to int64, fn func(v int64, acts []Action) error) error {
	for lo := from; lo <= to; lo += commitReadChunk * 8 {
		hi := min(lo+commitReadChunk*8-1, to)
		acts := make([][]Action, hi-lo+1)
		errs := make([]error, hi-lo+1)
		var g errgroup.Group
		g.SetLimit(commitReadWorkers)
		for v := lo; v <= hi; v++ {
			g.Go(func() error {
				key := t.commitKey(v)
				b, err := t.getAll(ctx, key)
				switch {
				case err != nil:
					errs[v-lo] = fmt.Errorf("read version %d: %w", v, err)
				case len(b) == 0:
					errs[v-lo] = fmt.Errorf("read version %d: corrupt commit file %s: the file is empty", v, key)
				case v == from || bytes.Contains(b, metaDataKey):
					if acts[v-lo], err = DecodeActions(bytes.NewReader(b)); err != nil {
						errs[v-lo] = fmt.Errorf("read version %d: corrupt commit file %s: %w", v, key, err)
					}
				}
				return nil
			})
		}
		g.Wait()
		for i := range acts {
			if errs[i] != nil {
				return errs[i]
			}
			if acts[i] == nil {
				continue
			}
			if err := fn(lo+int64(i), acts[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
