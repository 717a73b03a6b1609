package delta

import (
	"fmt"
	"strings"
)

// Schemas as a person reads them, and what changed between two of them. A column is
// known by its column mapping id where both schemas have ids (a rename keeps the id, a
// drop and a re-add of the same name gets a new one), else by its name; so a rename is
// a rename, never a drop and an add.

// metaComment is the field metadata key of a column's comment (Spark's COMMENT).
const metaComment = "comment"

// ColumnInfo is one column of a schema, nested fields included, as `table schema` and
// the table page show it.
type ColumnInfo struct {
	// Path is the column's dotted name ("address.city"; an array's element struct is
	// "element": "items.element.sku"); Depth its nesting (0 at the top level).
	Path  string
	Depth int
	// Type is the Delta type ("long", "decimal(14,2)"); a struct whose fields follow as
	// their own rows is "struct", an array of such a struct "array<struct>".
	Type      string
	Nullable  bool
	Comment   string
	Partition bool
	// Identity is set for an identity column.
	Identity *IdentityColumn
	// PhysicalName and ID are the column's name in the data files and its column
	// mapping id (none: "" and 0, a table without column mapping).
	PhysicalName string
	ID           int64
	// TypeChanges are the widenings the column went through, oldest first.
	TypeChanges []TypeChange
}

// TypeChange is one widening of a column's type.
type TypeChange struct{ From, To string }

// DescribeSchema lists the columns of st (a snapshot's schema) with its partition
// columns marked, nested fields after their parent.
func DescribeSchema(st *StructType, partitionColumns []string) []ColumnInfo {
	var out []ColumnInfo
	var walk func(prefix string, depth int, s *StructType)
	walk = func(prefix string, depth int, s *StructType) {
		for _, f := range s.Fields {
			c := ColumnInfo{Path: prefix + f.Name, Depth: depth, Type: f.Type.String(), Nullable: f.Nullable}
			c.Comment, _ = f.Metadata[metaComment].(string)
			if depth == 0 {
				for _, p := range partitionColumns {
					c.Partition = c.Partition || strings.EqualFold(p, f.Name)
				}
			}
			if id, ok, err := IdentityField(f); err == nil && ok {
				c.Identity = &id
			}
			if isMapped(f) {
				c.PhysicalName = physicalName(f)
			}
			c.ID, _ = columnID(f)
			for _, tc := range typeChanges(f) {
				c.TypeChanges = append(c.TypeChanges, TypeChange{From: tc[0], To: tc[1]})
			}
			inner, elem := nestedStruct(f.Type)
			if inner != nil {
				c.Type = "struct"
				if elem != "" {
					c.Type = "array<struct>"
				}
			}
			out = append(out, c)
			if inner != nil {
				walk(c.Path+"."+elem, depth+1, inner)
			}
		}
	}
	walk("", 0, st)
	return out
}

// nestedStruct is the struct whose fields a column of type t lists as its own: t itself
// (elem "") or an array's element struct (elem "element."); nil for other types.
func nestedStruct(t DataType) (s *StructType, elem string) {
	switch v := t.(type) {
	case *StructType:
		return v, ""
	case *ArrayType:
		if s, ok := v.ElementType.(*StructType); ok {
			return s, "element."
		}
	}
	return nil, ""
}

// The kinds of a SchemaChange.
const (
	ColumnAdded       = "added"
	ColumnDropped     = "dropped"
	ColumnRenamed     = "renamed"
	ColumnWidened     = "widened"      // a type widening (CanWiden)
	ColumnRetyped     = "type changed" // any other type change (a table rewritten with a new schema)
	ColumnNullable    = "nullable"     // NOT NULL dropped
	ColumnNotNull     = "not null"     // NOT NULL added
	ColumnCommented   = "comment"      // the comment changed
	ColumnMappingOn   = "column mapping"
	PartitionsChanged = "partitioning"
)

// SchemaChange is one difference between two schemas of a table.
type SchemaChange struct {
	Kind string
	// Column is the column's dotted path in the newer schema (the older one's for a
	// dropped column); "" for ColumnMappingOn and PartitionsChanged.
	Column string
	// From and To say what changed: the old and new name (ColumnRenamed, From the old
	// dotted path), type (ColumnAdded: To only; ColumnWidened, ColumnRetyped), comment,
	// column mapping mode or partition columns.
	From, To string
	// ID is the column's column mapping id (0 without column mapping).
	ID int64
}

// String says the change in words: "added channel (string)", "renamed cust_name to
// customer_name", "widened quantity from integer to long".
func (c SchemaChange) String() string {
	switch c.Kind {
	case ColumnAdded:
		return fmt.Sprintf("added %s (%s)", c.Column, c.To)
	case ColumnDropped:
		return "dropped " + c.Column
	case ColumnRenamed:
		return fmt.Sprintf("renamed %s to %s", c.From, c.Column)
	case ColumnWidened:
		return fmt.Sprintf("widened %s from %s to %s", c.Column, c.From, c.To)
	case ColumnRetyped:
		return fmt.Sprintf("changed the type of %s from %s to %s", c.Column, c.From, c.To)
	case ColumnNullable:
		return c.Column + " made nullable"
	case ColumnNotNull:
		return c.Column + " made NOT NULL"
	case ColumnCommented:
		if c.To == "" {
			return "removed the comment of " + c.Column
		}
		return fmt.Sprintf("commented %s: %q", c.Column, c.To)
	case ColumnMappingOn:
		return fmt.Sprintf("column mapping turned on (%s)", c.To)
	case PartitionsChanged:
		return fmt.Sprintf("partitioned by %s (was %s)", orNone(c.To), orNone(c.From))
	}
	return c.Kind + " " + c.Column
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// DiffSchemas lists what changed from schema old to schema new, column by column, in
// the new schema's order (nested fields after their parent), then the dropped columns.
// Columns are matched by their column mapping ids where both have them, else by name
// (case-insensitively), so a rename is reported as one and a column dropped and added
// again under its name as a drop and an add. Metadata that is not the column's
// definition (an identity column's high-water mark) is not compared.
func DiffSchemas(old, new *StructType) []SchemaChange {
	var out []SchemaChange
	diffStructs(&out, "", "", old, new)
	return out
}

func diffStructs(out *[]SchemaChange, oldPrefix, prefix string, old, new *StructType) {
	match := matchFields(old, new)
	used := make([]bool, len(old.Fields))
	for i, f := range new.Fields {
		path := prefix + f.Name
		id, _ := columnID(f)
		j := match[i]
		if j < 0 {
			*out = append(*out, SchemaChange{Kind: ColumnAdded, Column: path, To: f.Type.String(), ID: id})
			continue
		}
		used[j] = true
		o := old.Fields[j]
		if o.Name != f.Name {
			*out = append(*out, SchemaChange{Kind: ColumnRenamed, Column: path, From: oldPrefix + o.Name, To: f.Name, ID: id})
		}
		oi, oe := nestedStruct(o.Type)
		ni, ne := nestedStruct(f.Type)
		switch {
		case oi != nil && ni != nil && oe == ne:
			diffStructs(out, oldPrefix+o.Name+"."+oe, path+"."+ne, oi, ni)
		case o.Type.String() != f.Type.String():
			kind := ColumnRetyped
			if CanWiden(o.Type, f.Type) {
				kind = ColumnWidened
			}
			*out = append(*out, SchemaChange{Kind: kind, Column: path, From: o.Type.String(), To: f.Type.String(), ID: id})
		}
		switch {
		case !o.Nullable && f.Nullable:
			*out = append(*out, SchemaChange{Kind: ColumnNullable, Column: path, ID: id})
		case o.Nullable && !f.Nullable:
			*out = append(*out, SchemaChange{Kind: ColumnNotNull, Column: path, ID: id})
		}
		oc, _ := o.Metadata[metaComment].(string)
		nc, _ := f.Metadata[metaComment].(string)
		if oc != nc {
			*out = append(*out, SchemaChange{Kind: ColumnCommented, Column: path, From: oc, To: nc, ID: id})
		}
	}
	for j, o := range old.Fields {
		if !used[j] {
			id, _ := columnID(o)
			*out = append(*out, SchemaChange{Kind: ColumnDropped, Column: oldPrefix + o.Name, From: o.Type.String(), ID: id})
		}
	}
}

// matchFields pairs each field of new with its field of old (-1: none): by column
// mapping id when both have one; else by physical name (a column of a table that
// turned column mapping on keeps its name as its physical name, even when renamed in
// the same commit), else by name, among the fields not paired yet.
func matchFields(old, new *StructType) []int {
	match := make([]int, len(new.Fields))
	taken := make([]bool, len(old.Fields))
	for i, f := range new.Fields {
		match[i] = -1
		id, ok := columnID(f)
		if !ok {
			continue
		}
		for j, o := range old.Fields {
			if oid, ok := columnID(o); ok && oid == id && !taken[j] {
				match[i], taken[j] = j, true
				break
			}
		}
	}
	for _, name := range []func(*StructField) string{physicalName, func(f *StructField) string { return f.Name }} {
		for i, f := range new.Fields {
			if match[i] >= 0 {
				continue
			}
			_, newHasID := columnID(f)
			for j, o := range old.Fields {
				if _, oldHasID := columnID(o); taken[j] || newHasID && oldHasID || !strings.EqualFold(name(o), name(f)) {
					continue
				}
				match[i], taken[j] = j, true
				break
			}
		}
	}
	return match
}
