package delta

// Type widening (the typeWidening feature): a column's type may change to a wider one
// with a metadata-only commit; files written before keep their narrower physical type and
// are read widened (schema.Cast). Each change is recorded in the field's metadata
// (delta.typeChanges: fromType, toType), so a reader knows that older files' statistics
// are in the old type.

import dschema "github.com/orchestrator-io/orchestrator/delta/schema"

const metaTypeChanges = "delta.typeChanges"

// CanWiden reports whether typeWidening lets a column of type from become to
// (schema.CanWiden).
func CanWiden(from, to DataType) bool { return dschema.CanWiden(from, to) }

// typeChanges is a field's recorded type changes (from, to), oldest first.
func typeChanges(f *StructField) [][2]string {
	list, _ := f.Metadata[metaTypeChanges].([]any)
	var out [][2]string
	for _, e := range list {
		m, _ := e.(map[string]any)
		from, _ := m["fromType"].(string)
		to, _ := m["toType"].(string)
		if from != "" && to != "" {
			out = append(out, [2]string{from, to})
		}
	}
	return out
}

// statsComparable reports whether the statistics a file holds for f compare with values
// of f's type whatever type the file was written in: true unless f was widened from
// another kind of type (an integer to a double or decimal, a date to a timestamp), whose
// older files' statistics read otherwise; a scan then does not skip by them.
func statsComparable(f *StructField) bool {
	for _, c := range typeChanges(f) {
		from, err1 := ParsePrimitive(c[0])
		to, err2 := ParsePrimitive(c[1])
		if err1 != nil || err2 != nil {
			return false
		}
		if dschema.IntegerRank(from) > 0 && dschema.IntegerRank(to) > 0 || from.String() == TypeFloat && to.String() == TypeDouble {
			continue
		}
		if _, ok := from.(*DecimalType); ok {
			if t, ok := to.(*DecimalType); ok && t.Scale == from.(*DecimalType).Scale {
				continue
			}
		}
		return false
	}
	return true
}

// recordTypeChange adds a change of f's type to f's metadata (a copy of it).
func recordTypeChange(f *StructField, from, to DataType) {
	md := make(map[string]any, len(f.Metadata)+1)
	for k, v := range f.Metadata {
		md[k] = v
	}
	list, _ := md[metaTypeChanges].([]any)
	list = append(append([]any(nil), list...), map[string]any{"fromType": from.String(), "toType": to.String()})
	md[metaTypeChanges] = list
	f.Metadata = md
}
