package delta

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// Column mapping (the columnMapping feature, delta.columnMapping.mode name or id): a
// field of the schema has a logical name (what readers see), a physical name and an id,
// both in its metadata. Data files name their columns (nested fields too) by physical
// name and carry the ids as Parquet field ids; add actions key partitionValues and stats
// by physical name. A rename changes the logical name only and a drop removes the field
// from the schema, so neither rewrites a file.
//
// This package keeps logical names everywhere above the files: a file's columns are
// renamed to logical names as they are read (fileColumns), a record's to physical names
// as it is written (physicalArrow), and partitionValues and stats are looked up by the
// physical name (physicalName). A field without mapping metadata (a table without column
// mapping) is its own physical name, so nothing changes for such tables.

// The property keys and field metadata keys of column mapping.
const (
	propColumnMappingMode  = "delta.columnMapping.mode"
	propColumnMappingMaxID = "delta.columnMapping.maxColumnId"
	metaColumnID           = "delta.columnMapping.id"
	metaPhysicalName       = "delta.columnMapping.physicalName"
	parquetFieldID         = "PARQUET:field_id" // Arrow field metadata of a Parquet field id
)

// PropColumnMappingMode is the table property that turns column mapping on (name or
// id), for commands that tell the user to set it.
const PropColumnMappingMode = propColumnMappingMode

// physicalName is the name f's column has in data files, partitionValues and stats.
func physicalName(f *StructField) string {
	if p, ok := f.Metadata[metaPhysicalName].(string); ok && p != "" {
		return p
	}
	return f.Name
}

// isMapped reports whether f carries a physical name of its own.
func isMapped(f *StructField) bool {
	p, ok := f.Metadata[metaPhysicalName].(string)
	return ok && p != ""
}

// columnID is f's column mapping id (ok false: none).
func columnID(f *StructField) (int64, bool) {
	return metadataInt(f.Metadata[metaColumnID])
}

func metadataInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case interface{ Int64() (int64, error) }: // json.Number
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// schemaMapped reports whether any field of st (nested included) has a physical name.
func schemaMapped(st *StructType) bool {
	found := false
	walkFields(st, func(f *StructField) {
		if isMapped(f) {
			found = true
		}
	})
	return found
}

// walkFields calls fn for every field of t, nested ones included (inside structs, arrays
// and maps).
func walkFields(t DataType, fn func(f *StructField)) {
	switch v := t.(type) {
	case *StructType:
		for _, f := range v.Fields {
			fn(f)
			walkFields(f.Type, fn)
		}
	case *ArrayType:
		walkFields(v.ElementType, fn)
	case *MapType:
		walkFields(v.KeyType, fn)
		walkFields(v.ValueType, fn)
	}
}

// physicalPath is the physical names of a path of logical field names in st (a column
// of stats or a nested field); unknown names are kept as they are.
func physicalPath(st *StructType, path []string) []string {
	out := make([]string, len(path))
	var t DataType = st
	for i, name := range path {
		s, ok := t.(*StructType)
		var f *StructField
		if ok {
			f = s.Field(name)
		}
		if f == nil {
			copy(out[i:], path[i:])
			return out
		}
		out[i], t = physicalName(f), f.Type
	}
	return out
}

// physicalArrow is the Arrow schema data files of st's fields are written in: the same
// types, every field (nested too) named by its physical name and, when it has an id,
// carrying it as its Parquet field id.
func physicalArrow(st *StructType) (*arrow.Schema, error) {
	logical, err := dschema.ArrowSchema(st)
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(st.Fields))
	for i, f := range st.Fields {
		fields[i] = physicalField(f, logical.Field(i))
	}
	return arrow.NewSchema(fields, nil), nil
}

func physicalField(f *StructField, af arrow.Field) arrow.Field {
	af.Name = physicalName(f)
	if id, ok := columnID(f); ok {
		af.Metadata = arrow.NewMetadata([]string{parquetFieldID}, []string{strconv.FormatInt(id, 10)})
	}
	af.Type = physicalType(f.Type, af.Type)
	return af
}

// physicalType renames the struct fields inside an Arrow type (of Delta type t).
func physicalType(t DataType, at arrow.DataType) arrow.DataType {
	switch v := t.(type) {
	case *StructType:
		st := at.(*arrow.StructType)
		fields := make([]arrow.Field, len(v.Fields))
		for i, f := range v.Fields {
			fields[i] = physicalField(f, st.Field(i))
		}
		return arrow.StructOf(fields...)
	case *ArrayType:
		lt := at.(*arrow.ListType)
		elem := lt.ElemField()
		elem.Type = physicalType(v.ElementType, elem.Type)
		return arrow.ListOfField(elem)
	case *MapType:
		mt := at.(*arrow.MapType)
		k, it := mt.KeyField(), mt.ItemField()
		out := arrow.MapOfWithMetadata(physicalType(v.KeyType, k.Type), k.Metadata, physicalType(v.ValueType, it.Type), it.Metadata)
		out.KeysSorted = mt.KeysSorted
		if !it.Nullable {
			out.SetItemNullable(false)
		}
		return out
	}
	return at
}

// droppedPrefix names a file column that no field of the schema maps to (a dropped
// column), so that it never matches a field by name.
const droppedPrefix = "\x00dropped:"

// fileField finds the field of a data file's (Arrow) fields that holds logical field f:
// by its physical name, else by its Parquet field id when both have one (a field without
// column mapping: by its name, in any case). -1: the file lacks it. The physical name
// comes first: mode name resolves by it alone, and ids in files written before mapping
// was turned on (by a writer that numbers every column) mean other columns; mode id
// resolves by id, which the fallback finds where the names differ (a table converted
// from Iceberg), and Spark writes both alike.
func fileField(fields []arrow.Field, f *StructField) int {
	if isMapped(f) {
		name := physicalName(f)
		for i, ff := range fields {
			if ff.Name == name {
				return i
			}
		}
	}
	if id, ok := columnID(f); ok {
		for i, ff := range fields {
			if v, ok := ff.Metadata.GetValue(parquetFieldID); ok && v == strconv.FormatInt(id, 10) {
				return i
			}
		}
	}
	if isMapped(f) {
		return -1
	}
	for i, ff := range fields {
		if strings.EqualFold(ff.Name, f.Name) {
			return i
		}
	}
	return -1
}

// logicalType is the type a file column of Arrow type at (of Delta type t in the
// schema) reads as: the struct fields inside it renamed to their logical names, those
// that no field maps to to droppedPrefix names. It reports whether anything changed.
func logicalType(t DataType, at arrow.DataType) (arrow.DataType, bool) {
	switch v := t.(type) {
	case *StructType:
		st, ok := at.(*arrow.StructType)
		if !ok {
			return at, false
		}
		fields := st.Fields()
		out := make([]arrow.Field, len(fields))
		copy(out, fields)
		changed := false
		taken := make([]bool, len(fields))
		for _, f := range v.Fields {
			i := fileField(fields, f)
			if i < 0 || taken[i] {
				continue
			}
			taken[i] = true
			out[i].Name = f.Name
			var c bool
			out[i].Type, c = logicalType(f.Type, fields[i].Type)
			changed = changed || c || fields[i].Name != f.Name
		}
		for i := range out {
			if !taken[i] {
				out[i].Name = droppedPrefix + fields[i].Name
				changed = true
			}
		}
		if !changed {
			return at, false
		}
		return arrow.StructOf(out...), true
	case *ArrayType:
		lt, ok := at.(*arrow.ListType)
		if !ok {
			return at, false
		}
		elem := lt.ElemField()
		var c bool
		if elem.Type, c = logicalType(v.ElementType, elem.Type); !c {
			return at, false
		}
		return arrow.ListOfField(elem), true
	case *MapType:
		mt, ok := at.(*arrow.MapType)
		if !ok {
			return at, false
		}
		k, it := mt.KeyField(), mt.ItemField()
		kt, c1 := logicalType(v.KeyType, k.Type)
		vt, c2 := logicalType(v.ValueType, it.Type)
		if !c1 && !c2 {
			return at, false
		}
		out := arrow.MapOfWithMetadata(kt, k.Metadata, vt, it.Metadata)
		out.KeysSorted = mt.KeysSorted
		if !it.Nullable {
			out.SetItemNullable(false)
		}
		return out, true
	}
	return at, false
}

// newPhysicalName is the physical name of a new mapped column, as Spark names them.
func newPhysicalName() string { return "col-" + uuid.NewString() }

// assignColumnMapping gives every field of st (nested included) without an id the next
// id after maxID and a physical name (keepNames: its current name, as when column
// mapping is turned on for a table whose files name their columns so; else a new
// one). It returns the new highest id.
func assignColumnMapping(st *StructType, maxID int64, keepNames bool) int64 {
	walkFields(st, func(f *StructField) {
		if _, ok := columnID(f); ok {
			return
		}
		maxID++
		md := make(map[string]any, len(f.Metadata)+2)
		for k, v := range f.Metadata {
			md[k] = v
		}
		md[metaColumnID] = maxID
		if _, ok := md[metaPhysicalName]; !ok {
			if keepNames {
				md[metaPhysicalName] = f.Name
			} else {
				md[metaPhysicalName] = newPhysicalName()
			}
		}
		f.Metadata = md
	})
	return maxID
}

// maxColumnID is delta.columnMapping.maxColumnId, or the highest id of the schema when
// that is higher (or the property absent).
func maxColumnID(md *Metadata, st *StructType) int64 {
	var maxID int64
	if v, ok := md.Configuration[propColumnMappingMaxID]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			maxID = n
		}
	}
	walkFields(st, func(f *StructField) {
		if id, ok := columnID(f); ok && id > maxID {
			maxID = id
		}
	})
	return maxID
}

// checkColumnMapping checks a schema of a table with column mapping: every field has an
// id and a physical name, ids and physical names unique among siblings' ids.
func checkColumnMapping(st *StructType) error {
	ids := map[int64]string{}
	var err error
	walkFields(st, func(f *StructField) {
		if err != nil {
			return
		}
		id, ok := columnID(f)
		if !ok || !isMapped(f) {
			err = fmt.Errorf("column %s has no column mapping id or physical name", f.Name)
			return
		}
		if other, dup := ids[id]; dup {
			err = fmt.Errorf("columns %s and %s have the same column mapping id %d", other, f.Name, id)
			return
		}
		ids[id] = f.Name
	})
	return err
}

// partitionValue is a file's value of the partition column of logical name name and
// physical name phys: partitionValues names it physically with column mapping (then
// exactly), else by its name in any case.
func partitionValue(a *Add, name, phys string) *string {
	if phys != name {
		return a.PartitionValues[phys]
	}
	for k, v := range a.PartitionValues {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// cloneSchema is a deep copy of st (through its schemaString).
func cloneSchema(st *StructType) (*StructType, error) {
	ss, err := st.SchemaString()
	if err != nil {
		return nil, err
	}
	return ParseSchema(ss)
}

// checkMappedFile refuses a data file of a column-mapped table that none of the table's
// columns maps to while it names one of them by its logical name (a file written
// without column mapping): read, its columns would be NULL.
func checkMappedFile(file *arrow.Schema, st *StructType) error {
	for _, f := range st.Fields {
		if fileField(file.Fields(), f) >= 0 {
			return nil
		}
	}
	for _, f := range st.Fields {
		if !isMapped(f) || physicalName(f) == f.Name {
			continue
		}
		for _, ff := range file.Fields() {
			if strings.EqualFold(ff.Name, f.Name) {
				return fmt.Errorf("the file names column %s by its logical name, not by its physical name %s: it was written without column mapping, and reading it would give NULLs", f.Name, physicalName(f))
			}
		}
	}
	return nil
}

// checkSchemaFeatures refuses a new metadata or protocol that other engines would refuse
// (or misread): a column-mapped schema with a field lacking its id or physical name
// (its files would name it by its logical name, which readers then read as NULL), or a
// timestamp_ntz column without the timestampNtz feature.
func checkSchemaFeatures(p *Protocol, md *Metadata, schema *StructType) error {
	if columnMappingMode(md) != "none" {
		if err := checkColumnMapping(schema); err != nil {
			return fmt.Errorf("%w (%s is %s: add columns with PlanEvolution and Evolve, which give them ids and physical names)", err, propColumnMappingMode, columnMappingMode(md))
		}
		if prop, ok := md.Configuration[propColumnMappingMaxID]; ok {
			if maxID := maxColumnID(&Metadata{}, schema); maxID > maxColumnID(md, &StructType{}) {
				return fmt.Errorf("column mapping id %d is above %s (%s)", maxID, propColumnMappingMaxID, prop)
			}
		}
	}
	if hasTimestampNTZ(schema) && !p.HasWriterFeature(FeatureTimestampNTZ) {
		return fmt.Errorf("the schema has a timestamp_ntz column but the protocol lacks the %s feature", FeatureTimestampNTZ)
	}
	return nil
}

// tableSchema is the schema a snapshot of metadata md reads and writes files in: md's,
// without column mapping metadata when the table's mode is none, since its files then
// name columns by their names whatever the fields' metadata says (a schema copied from
// a mapped table, a mapping dropped by another engine).
func tableSchema(md *Metadata) (*StructType, error) {
	schema, err := md.Schema()
	if err != nil {
		return nil, err
	}
	if columnMappingMode(md) == "none" && schemaMapped(schema) {
		schema = withoutColumnMapping(schema)
	}
	return schema, nil
}

// withoutColumnMapping is st with every field's column mapping metadata (id and
// physical name) removed, for a table whose mode is none: its files name columns by
// their logical names.
func withoutColumnMapping(st *StructType) *StructType {
	out, err := cloneSchema(st)
	if err != nil {
		return st
	}
	walkFields(out, func(f *StructField) {
		if _, ok := f.Metadata[metaPhysicalName]; !ok {
			if _, ok := f.Metadata[metaColumnID]; !ok {
				return
			}
		}
		md := copyMetadata(f.Metadata)
		delete(md, metaPhysicalName)
		delete(md, metaColumnID)
		f.Metadata = md
	})
	return out
}
