package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
)

// declared returns the declared table named name, or a clear error.
func (e *Env) declared(name string) (*Table, error) {
	t, ok := e.Tables[name]
	if !ok {
		return nil, fmt.Errorf("table %s is not declared in the pipeline", name)
	}
	return t, nil
}

// tableExists reports whether a Delta table exists at the table's path.
func (e *Env) tableExists(ctx context.Context, t *Table) (bool, error) {
	ok, err := delta.Exists(ctx, e.Warehouse, t.Path)
	if err != nil {
		return false, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return ok, nil
}

// openTable opens a declared table that must exist (a source).
func (e *Env) openTable(ctx context.Context, t *Table) (*delta.Table, error) {
	ok, err := e.tableExists(ctx, t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("table %s does not exist yet at %s (has the stage that fills it run?)", t.Name, t.Path)
	}
	return e.openDeclared(ctx, t)
}

// openDeclared opens a declared table that exists and refuses it when it differs from
// its declaration.
func (e *Env) openDeclared(ctx context.Context, t *Table) (*delta.Table, error) {
	dt, err := delta.Open(ctx, e.Warehouse, t.Path, e.Delta)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	// The declaration is the truth: safe schema changes converge here, in one
	// metadata-only commit with the run's lineage, before any stage writes; a concurrent
	// run doing the same wins or loses the commit, and the loser finds nothing to do.
	for attempt := 1; ; attempt++ {
		snap, err := dt.Snapshot(ctx)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		ev, diffs := CheckTable(t, snap, e.pipelineFile())
		if len(diffs) > 0 {
			return nil, &DifferenceError{Differences: diffs}
		}
		if ev == nil {
			return dt, nil
		}
		v, err := dt.Evolve(ctx, ev, e.lineage())
		var ce *delta.ConflictError
		if errors.As(err, &ce) && attempt < conflictAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		e.Log().Info("table schema converged to its declaration", "table", t.Name, "version", v, "changes", fmt.Sprint(ev.Steps))
	}
}

func (e *Env) pipelineFile() string {
	if e.PipelineFile != "" {
		return e.PipelineFile
	}
	return "PIPELINE.yaml"
}

// openOrCreate opens a declared table, creating it from its declaration on first use.
// Two stages creating it at once is fine: the loser opens the winner's table.
func (e *Env) openOrCreate(ctx context.Context, t *Table) (*delta.Table, error) {
	ok, err := e.tableExists(ctx, t)
	if err != nil {
		return nil, err
	}
	if !ok {
		lineage := e.Lineage
		_, err := delta.Create(ctx, e.Warehouse, t.Path, delta.CreateOptions{
			Schema:           t.Schema,
			PartitionColumns: t.PartitionBy,
			ClusterBy:        t.ClusterBy,
			Properties:       t.Properties,
			Name:             t.Name,
			Description:      t.Description,
			Lineage:          &lineage,
		}, e.Delta)
		if err != nil && !errors.Is(err, delta.ErrTableExists) {
			return nil, fmt.Errorf("create table %s: %w", t.Name, err)
		}
		if err == nil {
			e.createdMu.Lock()
			e.created = append(e.created, t)
			e.createdMu.Unlock()
		}
	}
	return e.openDeclared(ctx, t)
}

// lineage returns a copy of the environment's lineage for one commit.
func (e *Env) lineage() *delta.Lineage {
	l := e.Lineage
	l.Expectations = e.rows.metrics()
	return &l
}

// flow is a stage's source table (which must exist) and target table (created on first
// use), each with its latest snapshot.
type flow struct {
	srcDecl, dstDecl *Table
	src, dst         *delta.Table
	srcSnap, dstSnap *delta.Snapshot
}

// openFlow opens the declared source and target of a stage that reads one table into
// another.
func (e *Env) openFlow(ctx context.Context, source, target string) (*flow, error) {
	f := &flow{}
	var err error
	if f.srcDecl, err = e.declared(source); err != nil {
		return nil, err
	}
	if f.dstDecl, err = e.declared(target); err != nil {
		return nil, err
	}
	if f.src, err = e.openTable(ctx, f.srcDecl); err != nil {
		return nil, err
	}
	if f.srcSnap, err = f.src.Snapshot(ctx); err != nil {
		return nil, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
	}
	if f.dst, err = e.openOrCreate(ctx, f.dstDecl); err != nil {
		return nil, err
	}
	if f.dstSnap, err = f.dst.Snapshot(ctx); err != nil {
		return nil, fmt.Errorf("table %s: %w", f.dstDecl.Name, err)
	}
	return f, nil
}

// byteKeys refuses key columns of the source whose strings compare by a collation other
// than the byte order (Delta's collations feature, written by Spark): a stage matches keys
// by their bytes, where Spark matches 'ABC' with 'abc' under UTF8_LCASE.
func (f *flow) byteKeys(keys []string) error {
	sch := f.srcSnap.Schema()
	for _, k := range keys {
		if fld := sch.Field(k); fld != nil {
			if c := fld.Collation(); c != "" {
				return fmt.Errorf("source %s: key column %s has collation %s: stages match keys by their bytes, where Spark matches them by the collation; key on a column without one", f.srcDecl.Name, fld.Name, c)
			}
		}
	}
	return nil
}
