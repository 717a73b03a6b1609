package parquet

import "encoding/binary"

// rleEncoder writes Parquet's RLE / bit-packing hybrid encoding (definition levels,
// dictionary indices) the way arrow-go's utils.RleEncoder does, byte for byte: values
// are taken 8 at a time; 8 or more equal values in a row become a repeated run, other
// values literal groups of 8 bit-packed values, a literal run being closed at 63 groups.
// The run choices are arrow-go's, so that the pages are its pages; putRun adds many equal
// values at once where arrow-go would add them one by one to the same effect.
type rleEncoder struct {
	out   []byte
	width uint      // bits per value
	buf   [8]uint64 // values not yet written as a literal group or counted in a run
	nbuf  int
	cur   uint64 // the value repeated rep times
	rep   int32
	lit   int32 // values in the open literal run
	ind   int   // offset in out of the open literal run's indicator byte; -1 if none
}

// reset starts over with values of width bits, appending to out.
func (e *rleEncoder) reset(out []byte, width uint) {
	*e = rleEncoder{out: out, width: width, ind: -1}
}

// put adds one value.
func (e *rleEncoder) put(v uint64) {
	if e.cur == v {
		e.rep++
		if e.rep > 8 {
			return // a long run goes on
		}
	} else {
		if e.rep >= 8 {
			e.flushRepeated()
		}
		e.rep = 1
		e.cur = v
	}
	e.buf[e.nbuf] = v
	e.nbuf++
	if e.nbuf == 8 {
		e.flushBuffered()
	}
}

// putRun adds n copies of v.
func (e *rleEncoder) putRun(v uint64, n int) {
	for ; n > 0; n-- {
		if e.rep >= 8 && e.cur == v {
			e.rep += int32(n) // what put would do one value at a time
			return
		}
		e.put(v)
	}
}

// flushBuffered handles a full group of 8 buffered values.
func (e *rleEncoder) flushBuffered() {
	if e.rep >= 8 {
		// The buffered values belong to the repeated run: close the literal run before it.
		e.nbuf = 0
		if e.lit != 0 {
			e.flushLiteral(true)
		}
		return
	}
	e.lit += int32(e.nbuf)
	e.flushLiteral(e.lit/8+1 >= 1<<6) // the indicator byte holds at most 63 groups
	e.rep = 0
}

// flushLiteral writes the buffered group (if any) to the open literal run, opening one,
// and with update closes the run by writing its indicator.
func (e *rleEncoder) flushLiteral(update bool) {
	if e.ind < 0 {
		e.ind = len(e.out)
		e.out = append(e.out, 0)
	}
	if e.nbuf > 0 {
		e.packGroup()
	}
	e.nbuf = 0
	if update {
		e.out[e.ind] = byte(e.lit/8<<1 | 1)
		e.ind = -1
		e.lit = 0
	}
}

// packGroup appends the 8 buffered values, width bits each, least significant first
// (width ≤ 32: the accumulator never holds more than 7 + 32 bits).
func (e *rleEncoder) packGroup() {
	var acc uint64
	var bits uint
	for _, v := range e.buf {
		acc |= v << bits
		for bits += e.width; bits >= 8; bits -= 8 {
			e.out = append(e.out, byte(acc))
			acc >>= 8
		}
	}
}

// flushRepeated writes the repeated run.
func (e *rleEncoder) flushRepeated() {
	e.out = binary.AppendUvarint(e.out, uint64(e.rep)<<1)
	for i := uint(0); i < (e.width+7)/8; i++ {
		e.out = append(e.out, byte(e.cur>>(8*i)))
	}
	e.rep = 0
	e.nbuf = 0
}

// flush ends the encoding and returns the bytes.
func (e *rleEncoder) flush() []byte {
	if e.lit > 0 || e.rep > 0 || e.nbuf > 0 {
		allRep := e.lit == 0 && (e.rep == int32(e.nbuf) || e.nbuf == 0)
		if e.rep > 0 && allRep {
			e.flushRepeated()
		} else {
			if e.nbuf > 0 {
				for ; e.nbuf < 8; e.nbuf++ {
					e.buf[e.nbuf] = 0
				}
				e.lit += 8
			}
			e.flushLiteral(true)
			e.rep = 0
		}
	}
	return e.out
}
