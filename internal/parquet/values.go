package parquet

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
)

// binaryValues is what *array.String and *array.Binary share.
type binaryValues interface {
	arrow.Array
	ValueOffsets() []int32
	ValueBytes() []byte
}

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

// SortKey16 is the first 16 bytes of b, zero-padded, as two big-endian numbers: when
// (hi, lo) of x is below that of y, x is below y bytewise; equal keys decide nothing.
func SortKey16(b []byte) (hi, lo uint64) {
	switch n := len(b); {
	case n >= 16:
		return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	case n > 8:
		return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[n-8:]) << (8 * (16 - n))
	case n == 8:
		return binary.BigEndian.Uint64(b), 0
	}
	var buf [8]byte
	copy(buf[:], b)
	return binary.BigEndian.Uint64(buf[:]), 0
}
