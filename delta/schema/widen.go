package schema

// IntegerRank orders the integer types by width (0: not an integer type).
func IntegerRank(t DataType) int {
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

// integerDigits is the number of integer digits a decimal needs for a widening from an
// integer type: Delta's rule is decimal(10 + k1, k2) with k1 >= k2 >= 0 from byte, short
// and integer, decimal(20 + k1, k2) from long (Spark refuses byte to decimal(4,1), which
// would hold every byte: the preview feature allowed it, the stable one does not).
var integerDigits = map[int]int{1: 10, 2: 10, 3: 10, 4: 20}

// CanWiden reports whether typeWidening lets a column of type from become to (a wider
// type that holds every value of from exactly): byte to short to integer to long, float
// to double, byte, short and integer to double, any integer to a decimal with enough
// integer digits, a decimal to one with at least as many integer and fraction digits,
// date to timestamp_ntz.
func CanWiden(from, to DataType) bool {
	if from.String() == to.String() {
		return false
	}
	fr, tr := IntegerRank(from), IntegerRank(to)
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
