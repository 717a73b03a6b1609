package arrowx

// OneValue reports whether the values that offs delimit in data (data starting at the
// first value) are all one value: one length, and the bytes a repetition of the first's
// (a load's file name in every row). At least one value.
func OneValue(offs []int32, data []byte) bool {
	if !ConstantOffsets(offs) {
		return false
	}
	w := int(offs[1] - offs[0])
	data = data[:int(offs[len(offs)-1]-offs[0])]
	return string(data[w:]) == string(data[:len(data)-w])
}

// ConstantOffsets reports whether the values the offsets delimit all have one length
// (at least one value).
func ConstantOffsets(offs []int32) bool {
	if len(offs) < 2 {
		return false
	}
	w := offs[1] - offs[0]
	for i := 2; i < len(offs); i++ {
		if offs[i]-offs[i-1] != w {
			return false
		}
	}
	return true
}
