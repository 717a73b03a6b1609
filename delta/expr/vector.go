package expr

import (
	"math/big"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// evalVector evaluates the leaves evalFast leaves to the per-row path, over a whole
// array at once: IS [NOT] NULL from the validity bitmap, and a decimal column compared
// with a literal its scale holds exactly, as 128-bit integers (no big.Rat per row). ok is
// false when it does not apply.
func (b *Bound) evalVector(arr arrow.Array, valid []bool) ([]Truth, bool) {
	if valid != nil {
		return nil, false
	}
	switch b.kind {
	case bNull:
		out := make([]Truth, arr.Len())
		// A void column's array (arrow.NULL) has no validity bitmap: IsNull says false
		// of each of its rows, all of which are NULL.
		none, all := arr.NullN() == 0, arr.NullN() == arr.Len()
		for i := range out {
			out[i] = boolTri((all || !none && arr.IsNull(i)) != b.not)
		}
		return out, true
	case bCmp:
		a, ok := arr.(*array.Decimal128)
		if !ok {
			return nil, false
		}
		lit, ok := decimalLiteral(b.vals[0], a.DataType().(*arrow.Decimal128Type).Scale)
		if !ok {
			return nil, false
		}
		out := make([]Truth, a.Len())
		for i, v := range a.Values() {
			out[i] = opTri(b.op, v.Cmp(lit))
		}
		nullsToTri(arr, out)
		return out, true
	}
	return nil, false
}

// decimalLiteral is v as the unscaled 128-bit integer of a decimal of that scale, when it
// is exactly one.
func decimalLiteral(v Value, scale int32) (decimal128.Num, bool) {
	var r *big.Rat
	switch v.kind {
	case vInt:
		r = new(big.Rat).SetInt64(v.i)
	case vDecimal:
		if v.r == nil {
			return decimal128.Num{}, false
		}
		r = new(big.Rat).Set(v.r)
	default:
		return decimal128.Num{}, false
	}
	if scale < 0 || scale > 38 {
		return decimal128.Num{}, false
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() || r.Num().BitLen() > 126 {
		return decimal128.Num{}, false
	}
	return decimal128.FromBigInt(r.Num()), true
}
