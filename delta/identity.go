package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Field metadata keys of identity columns (DELTA.md §10).
const (
	IdentityStart               = "delta.identity.start"
	IdentityStep                = "delta.identity.step"
	IdentityAllowExplicitInsert = "delta.identity.allowExplicitInsert"
	IdentityHighWaterMark       = "delta.identity.highWaterMark"
)

// IdentityColumn is a column GENERATED ALWAYS (or BY DEFAULT, with AllowExplicitInsert)
// AS IDENTITY (START WITH Start INCREMENT BY Step).
type IdentityColumn struct {
	Name                string
	Start, Step         int64
	AllowExplicitInsert bool
	// HighWaterMark is the last value generated so far; nil before the first insert.
	HighWaterMark *int64
}

// IdentityField returns the identity column f describes, or ok=false when f is not one.
func IdentityField(f *StructField) (col IdentityColumn, ok bool, err error) {
	if f == nil || f.Metadata == nil {
		return col, false, nil
	}
	raw, has := f.Metadata[IdentityStart]
	if !has {
		return col, false, nil
	}
	col.Name = f.Name
	if col.Start, err = metaInt(raw); err != nil {
		return col, false, fmt.Errorf("identity column %s: start: %w", f.Name, err)
	}
	col.Step = 1
	if raw, has := f.Metadata[IdentityStep]; has {
		if col.Step, err = metaInt(raw); err != nil {
			return col, false, fmt.Errorf("identity column %s: step: %w", f.Name, err)
		}
	}
	if col.Step == 0 {
		return col, false, fmt.Errorf("identity column %s: step is 0", f.Name)
	}
	if raw, has := f.Metadata[IdentityHighWaterMark]; has && raw != nil {
		hw, err := metaInt(raw)
		if err != nil {
			return col, false, fmt.Errorf("identity column %s: highWaterMark: %w", f.Name, err)
		}
		col.HighWaterMark = &hw
	}
	switch v := f.Metadata[IdentityAllowExplicitInsert].(type) {
	case bool:
		col.AllowExplicitInsert = v
	case string:
		col.AllowExplicitInsert = strings.EqualFold(v, "true")
	}
	return col, true, nil
}

func metaInt(raw any) (int64, error) {
	switch v := raw.(type) {
	case json.Number:
		return strconv.ParseInt(v.String(), 10, 64)
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, fmt.Errorf("not an integer: %v", v)
		}
		return int64(v), nil
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("not a number: %v", raw)
}

// IdentityColumns lists the snapshot's identity columns in schema order.
func (s *Snapshot) IdentityColumns() ([]IdentityColumn, error) {
	return identityColumns(s.Schema())
}

func identityColumns(schema *StructType) ([]IdentityColumn, error) {
	var out []IdentityColumn
	for _, f := range schema.Fields {
		c, ok, err := IdentityField(f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// ErrIdentityOverflow is wrapped when an identity column has no more values in range.
var ErrIdentityOverflow = errors.New("identity column values overflow")

// nextIdentity returns the first of n new values after the high-water mark and the new
// high-water mark (the last of them).
func nextIdentity(c IdentityColumn, n int64) (first, last int64, err error) {
	first = c.Start
	if c.HighWaterMark != nil {
		hw := *c.HighWaterMark
		// Never go back below start (a mark left by explicit inserts may be).
		if (c.Step > 0 && hw >= c.Start) || (c.Step < 0 && hw <= c.Start) {
			// The next value of the sequence start + k·step strictly beyond hw.
			k := (hw-c.Start)/c.Step + 1
			f, ok := mulAdd(c.Start, k, c.Step)
			if !ok {
				return 0, 0, fmt.Errorf("column %s: %w", c.Name, ErrIdentityOverflow)
			}
			first = f
		}
	}
	last, ok := mulAdd(first, n-1, c.Step)
	if !ok {
		return 0, 0, fmt.Errorf("column %s: %d values after %d with step %d: %w", c.Name, n, first, c.Step, ErrIdentityOverflow)
	}
	return first, last, nil
}

// mulAdd returns a + k·step, ok=false on int64 overflow.
func mulAdd(a, k, step int64) (int64, bool) {
	if k == 0 {
		return a, true
	}
	p := k * step
	if p/k != step {
		return 0, false
	}
	s := a + p
	if (p > 0 && s < a) || (p < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// identityState is what a transaction allocated from identity columns: the metadata it
// will commit and, per column, the ranges it handed out.
type identityState struct {
	schema    *StructType // copy of the snapshot's schema with updated high-water marks
	allocated map[string][][2]int64
}

// AllocateIdentity reserves n new values of the identity column: first, first+step, ...,
// first+(n-1)·step. The transaction commits the new high-water mark in its metaData, so a
// concurrent writer that allocated too conflicts (retry on a new snapshot). Rows carrying
// values allocated here are accepted as explicit values by the same transaction's
// AssignIdentity and Merge even when allowExplicitInsert is false.
func (tx *Transaction) AllocateIdentity(column string, n int64) (first, step int64, err error) {
	if n <= 0 {
		return 0, 0, fmt.Errorf("allocate identity: %d values", n)
	}
	st, err := tx.identity()
	if err != nil {
		return 0, 0, err
	}
	f := st.schema.Field(column)
	c, ok, err := IdentityField(f)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("allocate identity: %s is not an identity column", column)
	}
	first, last, err := nextIdentity(c, n)
	if err != nil {
		return 0, 0, err
	}
	md := make(map[string]any, len(f.Metadata)+1)
	for k, v := range f.Metadata {
		md[k] = v
	}
	md[IdentityHighWaterMark] = last
	f.Metadata = md
	st.allocated[strings.ToLower(c.Name)] = append(st.allocated[strings.ToLower(c.Name)], [2]int64{first, last})
	if err := tx.setIdentitySchema(st.schema); err != nil {
		return 0, 0, err
	}
	return first, c.Step, nil
}

// identity returns the transaction's identity state, copying the schema on first use.
func (tx *Transaction) identity() (*identityState, error) {
	if tx.ident != nil {
		return tx.ident, nil
	}
	if tx.snap == nil {
		return nil, errors.New("identity columns: no snapshot (creating the table)")
	}
	base := tx.snap.Schema()
	if tx.md != nil {
		s, err := tx.md.Schema()
		if err != nil {
			return nil, err
		}
		base = s
	}
	cp := &StructType{Fields: make([]*StructField, len(base.Fields))}
	for i, f := range base.Fields {
		g := *f
		cp.Fields[i] = &g
	}
	tx.ident = &identityState{schema: cp, allocated: map[string][][2]int64{}}
	return tx.ident, nil
}

func (tx *Transaction) setIdentitySchema(schema *StructType) error {
	ss, err := schema.SchemaString()
	if err != nil {
		return err
	}
	base := tx.md
	if base == nil {
		base = tx.snap.Metadata()
	}
	md := *base
	md.SchemaString = ss
	tx.md = &md
	return nil
}

// allocatedByTx says whether v was handed out to this transaction for column.
func (tx *Transaction) allocatedByTx(column string, step, v int64) bool {
	if tx.ident == nil {
		return false
	}
	for _, r := range tx.ident.allocated[strings.ToLower(column)] {
		lo, hi := r[0], r[1]
		if lo > hi {
			lo, hi = hi, lo
		}
		if v >= lo && v <= hi && (v-r[0])%step == 0 {
			return true
		}
	}
	return false
}

// AssignIdentity returns rec (table columns by name) with every identity column filled:
// a column that is absent, or whose values are all null, gets new values allocated as by
// AllocateIdentity; a column with values keeps them if the column allows explicit
// inserts or the values were allocated by this transaction, and is rejected otherwise.
// The caller releases the returned record.
func (tx *Transaction) AssignIdentity(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols, err := identityColumns(tx.schemaForWrite())
	if err != nil {
		return nil, err
	}
	rec.Retain()
	for _, c := range cols {
		next, err := tx.assignColumn(rec, c)
		rec.Release()
		if err != nil {
			return nil, err
		}
		rec = next
	}
	return rec, nil
}

func (tx *Transaction) schemaForWrite() *StructType {
	if tx.ident != nil {
		return tx.ident.schema
	}
	if tx.md != nil {
		if s, err := tx.md.Schema(); err == nil {
			return s
		}
	}
	return tx.snap.Schema()
}

// assignColumn fills or checks one identity column of rec; the result is a new reference.
func (tx *Transaction) assignColumn(rec arrow.RecordBatch, c IdentityColumn) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	idx := -1
	for i, f := range rec.Schema().Fields() {
		if strings.EqualFold(f.Name, c.Name) {
			idx = i
		}
	}
	if idx >= 0 && rec.Column(idx).NullN() < rec.Column(idx).Len() {
		arr := rec.Column(idx)
		if arr.NullN() > 0 {
			return nil, fmt.Errorf("identity column %s: some rows have values and some are null", c.Name)
		}
		if !c.AllowExplicitInsert {
			get, ok := arrowx.IntGetter(arr)
			if !ok {
				return nil, fmt.Errorf("identity column %s: values of type %s", c.Name, arr.DataType())
			}
			for i := 0; i < arr.Len(); i++ {
				if !tx.allocatedByTx(c.Name, c.Step, get(i)) {
					return nil, fmt.Errorf("identity column %s is GENERATED ALWAYS: explicit value %d is not allowed (delta.identity.allowExplicitInsert is false)", c.Name, get(i))
				}
			}
		}
		rec.Retain()
		return rec, nil
	}
	if n == 0 {
		rec.Retain()
		return rec, nil
	}
	first, step, err := tx.AllocateIdentity(c.Name, n)
	if err != nil {
		return nil, err
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.Reserve(int(n))
	for k := int64(0); k < n; k++ {
		b.Append(first + k*step)
	}
	vals := b.NewArray()
	b.Release()
	defer vals.Release()
	fields := append([]arrow.Field(nil), rec.Schema().Fields()...)
	cols := append([]arrow.Array(nil), rec.Columns()...)
	f := arrow.Field{Name: c.Name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	if idx >= 0 {
		fields[idx], cols[idx] = f, vals
	} else {
		fields, cols = append(fields, f), append(cols, vals)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, n), nil
}

// checkIdentityUpdate refuses assignments to identity columns (as Spark does).
func checkIdentityUpdate(schema *StructType, set map[string]any) error {
	for _, f := range schema.Fields {
		if _, ok := set[strings.ToLower(f.Name)]; !ok {
			continue
		}
		if _, isID, _ := IdentityField(f); isID {
			return fmt.Errorf("cannot update identity column %s", f.Name)
		}
	}
	return nil
}

// identityOnlyChange says whether md differs from the snapshot's metadata only in the
// high-water marks of identity columns (DELTA.md §9: a concurrent identity insert does not
// conflict with a transaction that changed no metadata).
func identityOnlyChange(snap *Snapshot, md *Metadata) bool {
	if snap == nil || md == nil {
		return false
	}
	old := snap.Metadata()
	if old.ID != md.ID || old.Name != md.Name || old.Description != md.Description ||
		old.Format.Provider != md.Format.Provider || !maps.Equal(old.Format.Options, md.Format.Options) ||
		!slices.Equal(old.PartitionColumns, md.PartitionColumns) || !maps.Equal(old.Configuration, md.Configuration) {
		return false
	}
	a, err := withoutHighWaterMarks(old)
	if err != nil {
		return false
	}
	b, err := withoutHighWaterMarks(md)
	return err == nil && a == b
}

func withoutHighWaterMarks(md *Metadata) (string, error) {
	s, err := md.Schema()
	if err != nil {
		return "", err
	}
	for _, f := range s.Fields {
		if _, ok := f.Metadata[IdentityHighWaterMark]; ok {
			cp := maps.Clone(f.Metadata)
			delete(cp, IdentityHighWaterMark)
			f.Metadata = cp
		}
	}
	return s.SchemaString()
}
