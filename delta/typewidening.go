package delta

// Type widening (the typeWidening feature): a column's type may change to a wider one
// with a metadata-only commit; files written before keep their narrower physical type and
// are read widened (schema.Cast). Each change is recorded in the field's metadata
// (delta.typeChanges: fromType, toType), so a reader knows that older files' statistics
// are in the old type.

const metaTypeChanges = "delta.typeChanges"

// integerRank orders the integer types by width (0: not an integer type).
func integerRank(t DataType) int {
	if p, ok := t.(*PrimitiveType); ok {
		switch p.Name {
		case TypeByte:
			return 1
		case TypeShort:
			return 2
		case TypeInteger:
			return 3
		case TypeLong:
			return 4
		}
	}
	return 0
}

// integerDigits is the number of decimal digits an integer type needs.
var integerDigits = map[int]int{1: 3, 2: 5, 3: 10, 4: 20}

// CanWiden reports whether typeWidening lets a column of type from become to (a wider
// type that holds every value of from exactly): byte to short to integer to long, float
// to double, byte, short and integer to double, any integer to a decimal with enough
// integer digits, a decimal to one with at least as many integer and fraction digits,
// date to timestamp_ntz.
func CanWiden(from, to DataType) bool {
	if from.String() == to.String() {
		return false
	}
	fr, tr := integerRank(from), integerRank(to)
	switch {
	case fr > 0 && tr > 0:
		return tr > fr
	case fr > 0:
		switch t := to.(type) {
		case *PrimitiveType:
			return t.Name == TypeDouble && fr <= 3
		case *DecimalType:
			return t.Precision-t.Scale >= integerDigits[fr]
		}
		return false
	}
	switch f := from.(type) {
	case *PrimitiveType:
		t, ok := to.(*PrimitiveType)
		return ok && (f.Name == TypeFloat && t.Name == TypeDouble || f.Name == TypeDate && t.Name == TypeTimestampNTZ)
	case *DecimalType:
		t, ok := to.(*DecimalType)
		return ok && t.Scale >= f.Scale && t.Precision-t.Scale >= f.Precision-f.Scale
	}
	return false
}

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
		if integerRank(from) > 0 && integerRank(to) > 0 || from.String() == TypeFloat && to.String() == TypeDouble {
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
