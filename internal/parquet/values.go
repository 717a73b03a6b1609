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
