package main

// The table commands (change data feed, DML, identity columns, RESTORE, VACUUM): thin
// wrappers over delta.Table's methods, so that the suite tests the library's behaviour and
// not this helper's.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// recordStream is what read and changes write out: a delta.Scanner or a delta.ChangesReader.
type recordStream interface {
	Schema() *arrow.Schema
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

// writeStream writes every record of s to the Arrow IPC file out.
func writeStream(out string, s recordStream) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(s.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		f.Close()
		return err
	}
	for s.Next() {
		if err := w.Write(s.RecordBatch()); err != nil {
			w.Close()
			f.Close()
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	if err := s.Err(); err != nil {
		w.Close()
		f.Close()
		return err
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printVersion(e *env, v int64) error {
	_, err := fmt.Fprintln(e.stdout, v)
	return err
}

// createCmd: a new, empty table with the schema of an Arrow file, optionally with an
// identity column (GENERATED ALWAYS AS IDENTITY) in front of it.
type createCmd struct {
	schemaFrom, partitionBy, identity string
	props                             map[string]string
}

func (c *createCmd) run(ctx context.Context, e *env) error {
	if c.schemaFrom == "" {
		return usageError{"create: --schema-from is required"}
	}
	recs, schema, err := readIPC(c.schemaFrom)
	if err != nil {
		return err
	}
	for _, r := range recs {
		r.Release()
	}
	st, err := delta.SchemaFromArrow(schema)
	if err != nil {
		return err
	}
	if c.identity != "" {
		parts := strings.Split(c.identity, ":")
		start, step := int64(1), int64(1)
		if len(parts) > 3 || parts[0] == "" {
			return usageError{fmt.Sprintf("create: --identity %q: want name[:start[:step]]", c.identity)}
		}
		for i, p := range parts[1:] {
			n, perr := strconv.ParseInt(p, 10, 64)
			if perr != nil {
				return usageError{fmt.Sprintf("create: --identity %q: %q is not an integer", c.identity, p)}
			}
			if i == 0 {
				start = n
			} else {
				step = n
			}
		}
		f := st.Field(parts[0])
		if f == nil {
			f = &delta.StructField{Name: parts[0], Type: &delta.PrimitiveType{Name: delta.TypeLong}}
			st.Fields = append([]*delta.StructField{f}, st.Fields...)
		}
		f.Nullable = false
		if f.Metadata == nil {
			f.Metadata = map[string]any{}
		}
		f.Metadata[delta.IdentityStart] = json.Number(strconv.FormatInt(start, 10))
		f.Metadata[delta.IdentityStep] = json.Number(strconv.FormatInt(step, 10))
		f.Metadata[delta.IdentityAllowExplicitInsert] = false
	}
	var parts []string
	if c.partitionBy != "" {
		parts = strings.Split(c.partitionBy, ",")
	}
	t, err := delta.Create(ctx, e.store, "", delta.CreateOptions{Schema: st, PartitionColumns: parts, Properties: c.props}, delta.Options{})
	if err != nil {
		return err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	return printVersion(e, snap.Version())
}

// appendCmd: INSERT INTO through delta.Table.Append (generates identity values).
type appendCmd struct{ in string }

func (c *appendCmd) run(ctx context.Context, e *env) error {
	if c.in == "" {
		return usageError{"append: --in is required"}
	}
	recs, _, err := readIPC(c.in)
	if err != nil {
		return err
	}
	defer arrowx.ReleaseRecords(recs)
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	v, err := t.Append(ctx, delta.AppendOptions{Records: recs})
	if err != nil {
		return err
	}
	return printVersion(e, v)
}

// changesCmd: the change data feed of versions from..to (table_changes).
type changesCmd struct{ from, to, out string }

func (c *changesCmd) run(ctx context.Context, e *env) error {
	if c.out == "" || c.from == "" {
		return usageError{"changes: --from and --out are required"}
	}
	from, err := strconv.ParseInt(c.from, 10, 64)
	if err != nil {
		return usageError{fmt.Sprintf("changes: --from %q: want an integer", c.from)}
	}
	opts := delta.ChangesOptions{StartVersion: &from, TableURI: e.tableURI()}
	if c.to != "" {
		to, err := strconv.ParseInt(c.to, 10, 64)
		if err != nil {
			return usageError{fmt.Sprintf("changes: --to %q: want an integer", c.to)}
		}
		opts.EndVersion = &to
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	r, err := t.Changes(ctx, opts)
	if err != nil {
		return err
	}
	defer r.Release()
	return writeStream(c.out, r)
}

// updateCmd: UPDATE table SET col = literal, ... [WHERE expr].
type updateCmd struct {
	where string
	set   map[string]string
}

func (c *updateCmd) run(ctx context.Context, e *env) error {
	if len(c.set) == 0 {
		return usageError{"update: at least one --set col=literal is required"}
	}
	opts := delta.UpdateOptions{Set: map[string]any{}}
	for k, v := range c.set {
		opts.Set[k] = parseLiteral(v)
	}
	if c.where != "" {
		p, err := expr.Parse(c.where)
		if err != nil {
			return usageError{fmt.Sprintf("update: --where: %v", err)}
		}
		opts.Where = p
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	res, err := t.Update(ctx, opts)
	if err != nil {
		return err
	}
	return printVersion(e, res.Version)
}

// deleteCmd: DELETE FROM table WHERE expr.
type deleteCmd struct{ where string }

func (c *deleteCmd) run(ctx context.Context, e *env) error {
	if c.where == "" {
		return usageError{"delete: --where is required"}
	}
	p, err := expr.Parse(c.where)
	if err != nil {
		return usageError{fmt.Sprintf("delete: --where: %v", err)}
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	res, err := t.Delete(ctx, delta.DeleteOptions{Where: p})
	if err != nil {
		return err
	}
	return printVersion(e, res.Version)
}

// mergeCmd: MERGE INTO table USING file ON keys
// [WHEN MATCHED AND <delete-when> THEN DELETE] WHEN MATCHED THEN UPDATE SET *
// WHEN NOT MATCHED THEN INSERT *.
type mergeCmd struct {
	in, on, deleteWhen string
	byPosition         bool
}

func (c *mergeCmd) run(ctx context.Context, e *env) error {
	if c.in == "" || c.on == "" {
		return usageError{"merge: --in and --on are required"}
	}
	opts := delta.MergeOptions{
		On:             strings.Split(c.on, ","),
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
	}
	if c.deleteWhen != "" {
		p, err := expr.Parse(c.deleteWhen)
		if err != nil {
			return usageError{fmt.Sprintf("merge: --delete-when: %v", err)}
		}
		opts.WhenMatched = append(opts.WhenMatched, delta.MergeClause{Cond: p, Action: delta.MergeDelete})
	}
	opts.WhenMatched = append(opts.WhenMatched, delta.MergeClause{Action: delta.MergeUpdate})
	recs, _, err := readIPC(c.in)
	if err != nil {
		return err
	}
	defer arrowx.ReleaseRecords(recs)
	opts.Source = recs
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	if c.byPosition {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return err
		}
		pos, err := positions(ctx, snap, recs, opts.On)
		if err != nil {
			return err
		}
		defer func() {
			for _, fm := range pos.Files {
				arrowx.ReleaseRecords(fm.Rows)
			}
		}()
		opts.Positions, opts.Tx = pos, t.NewTransaction(snap, delta.TxOptions{})
	}
	res, err := t.Merge(ctx, opts)
	if err != nil {
		return err
	}
	return printVersion(e, res.Version)
}

// positions joins the source records to snap's rows on the key columns on, as a caller
// of MergeOptions.Positions does: each match's file, row and target row.
func positions(ctx context.Context, snap *delta.Snapshot, src []arrow.RecordBatch, on []string) (*delta.MergePositions, error) {
	key := func(rec arrow.RecordBatch, i int) (string, error) {
		var b strings.Builder
		for _, k := range on {
			idx := rec.Schema().FieldIndices(k)
			if len(idx) != 1 {
				return "", fmt.Errorf("merge --by-position: no column %s", k)
			}
			b.WriteString(rec.Column(idx[0]).ValueStr(i))
			b.WriteByte(0)
		}
		return b.String(), nil
	}
	bySource := map[string]int32{}
	n := int32(0)
	for _, r := range src {
		for i := range int(r.NumRows()) {
			k, err := key(r, i)
			if err != nil {
				return nil, err
			}
			bySource[k] = n
			n++
		}
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	for sc.Next() {
		file, first, ok := sc.Position()
		if !ok {
			return nil, fmt.Errorf("merge --by-position: the scan lost its positions")
		}
		rec := sc.RecordBatch()
		var rows []int32
		fm := pos.Files[file.Path]
		for i := range int(rec.NumRows()) {
			k, err := key(rec, i)
			if err != nil {
				return nil, err
			}
			s, hit := bySource[k]
			if !hit {
				continue
			}
			if fm == nil {
				fm = &delta.FileMatches{}
				pos.Files[file.Path] = fm
			}
			fm.Target, fm.Source = append(fm.Target, first+int64(i)), append(fm.Source, s)
			rows = append(rows, int32(i))
		}
		if len(rows) > 0 {
			g, err := arrowx.GatherRows(ctx, rec, rows)
			if err != nil {
				return nil, err
			}
			fm.Rows = append(fm.Rows, g)
		}
	}
	return pos, sc.Err()
}

// restoreCmd: RESTORE TABLE table TO VERSION AS OF n.
type restoreCmd struct{ version string }

func (c *restoreCmd) run(ctx context.Context, e *env) error {
	v, err := strconv.ParseInt(c.version, 10, 64)
	if err != nil {
		return usageError{fmt.Sprintf("restore: --version %q: want an integer", c.version)}
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	nv, _, err := t.Restore(ctx, delta.RestoreOptions{Version: &v})
	if err != nil {
		return err
	}
	return printVersion(e, nv)
}

// vacuumCmd: VACUUM table [RETAIN d] with the real clock; prints the result as JSON.
type vacuumCmd struct {
	retain string
	force  bool
}

func (c *vacuumCmd) run(ctx context.Context, e *env) error {
	opts := delta.VacuumOptions{Force: c.force, TableURI: e.tableURI()}
	if c.retain != "" {
		d, err := time.ParseDuration(c.retain)
		if err != nil {
			return usageError{fmt.Sprintf("vacuum: --retain %q: %v", c.retain, err)}
		}
		opts.Retain = &d
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	res, err := t.Vacuum(ctx, opts)
	if err != nil {
		return err
	}
	return json.NewEncoder(e.stdout).Encode(map[string]any{
		"filesDeleted": nonNil(res.FilesDeleted), "bytesDeleted": res.BytesDeleted,
		"startVersion": res.StartVersion, "endVersion": res.EndVersion,
	})
}

// parseLiteral reads an UPDATE --set value: 'text', null, true/false, an integer, a
// float, or else the text itself (converted to the column's type by delta).
func parseLiteral(s string) any {
	switch {
	case len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'':
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	case strings.EqualFold(s, "null"):
		return nil
	case strings.EqualFold(s, "true"):
		return true
	case strings.EqualFold(s, "false"):
		return false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}
