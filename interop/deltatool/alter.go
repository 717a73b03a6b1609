package main

// alter: the schema changes of schema evolution (delta.PlanEvolution and Evolve,
// delta.Table.DropColumns), so that the suite can evolve our tables as Spark's ALTER
// TABLE evolves its own.

import (
	"context"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
)

type alterCmd struct {
	add, widen, rename, drop []string
	mapping                  string
}

// run makes the added, widened and renamed columns and the mapping mode one evolution
// (one commit), then drops the dropped columns in a second; it prints the last version.
func (c *alterCmd) run(ctx context.Context, e *env) error {
	if len(c.add)+len(c.widen)+len(c.rename)+len(c.drop) == 0 && c.mapping == "" {
		return usageError{"alter: give --add, --widen, --rename, --drop or --mapping"}
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	v := int64(-1)
	if len(c.add)+len(c.widen)+len(c.rename) > 0 || c.mapping != "" {
		ss, err := snap.Schema().SchemaString()
		if err != nil {
			return err
		}
		decl, err := delta.ParseSchema(ss)
		if err != nil {
			return err
		}
		opts := delta.EvolutionOptions{RenamedFrom: map[string]string{}, ColumnMapping: c.mapping}
		for _, a := range c.add {
			name, typ, err := nameType("add", a)
			if err != nil {
				return err
			}
			decl.Fields = append(decl.Fields, &delta.StructField{Name: name, Type: typ, Nullable: true, Metadata: map[string]any{}})
		}
		for _, w := range c.widen {
			name, typ, err := nameType("widen", w)
			if err != nil {
				return err
			}
			f := decl.Field(name)
			if f == nil {
				return fmt.Errorf("alter: --widen %s: no such column", name)
			}
			f.Type = typ
		}
		for _, r := range c.rename {
			from, to, ok := strings.Cut(r, ":")
			f := decl.Field(from)
			if !ok || f == nil {
				return usageError{fmt.Sprintf("alter: --rename %q: want old:new with old a column", r)}
			}
			f.Name = to
			opts.RenamedFrom[to] = from
		}
		ev, problems := delta.PlanEvolution(snap, decl, opts)
		if len(problems) > 0 {
			var msg []string
			for _, p := range problems {
				msg = append(msg, p.String())
			}
			return fmt.Errorf("alter: %s", strings.Join(msg, "; "))
		}
		if v, err = t.Evolve(ctx, ev, nil); err != nil {
			return err
		}
		if snap, err = t.Snapshot(ctx); err != nil {
			return err
		}
	}
	if len(c.drop) > 0 {
		if v, err = t.DropColumns(ctx, snap, c.drop, nil); err != nil {
			return err
		}
	}
	return printVersion(e, v)
}

// nameType splits name:type (a Delta type name: long, decimal(14,2), ...).
func nameType(flag, s string) (string, delta.DataType, error) {
	name, typ, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return "", nil, usageError{fmt.Sprintf("alter: --%s %q: want name:type", flag, s)}
	}
	t, err := delta.ParsePrimitive(typ)
	if err != nil {
		return "", nil, usageError{fmt.Sprintf("alter: --%s %q: %v", flag, s, err)}
	}
	return name, t, nil
}
