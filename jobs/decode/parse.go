package decode

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"time"
	"unsafe"
)

// The value parsers below work on byte slices, never allocate on success, and report a
// short reason (or "") on failure; the caller turns that into an *Error naming the file,
// line and column.

// bstr views b as a string without copying; the string must not outlive b's contents.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// parseInt parses an optionally signed decimal integer that must fit in a signed integer
// of the given bit size.
func parseInt(b []byte, bitSize int) (int64, bool, string) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	if i == len(b) {
		return 0, false, ""
	}
	var v uint64
	over := false
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			return 0, false, ""
		}
		if v > (math.MaxUint64-9)/10 {
			over = true
			continue
		}
		v = v*10 + uint64(c)
	}
	limit := uint64(1) << (bitSize - 1)
	if over || (neg && v > limit) || (!neg && v >= limit) {
		return 0, false, "out of range"
	}
	if neg {
		return -int64(v), true, ""
	}
	return int64(v), true, ""
}

// parseFloat parses a float of the given bit size (strconv syntax: "1.5", "-2e10", "NaN", "Inf").
func parseFloat(b []byte, bitSize int) (float64, bool, string) {
	f, err := strconv.ParseFloat(bstr(b), bitSize)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, false, "out of range"
		}
		return 0, false, ""
	}
	return f, true, ""
}

// parseBool accepts true/false, 1/0, yes/no, case-insensitively.
func parseBool(b []byte) (bool, bool) {
	switch len(b) {
	case 1:
		switch b[0] {
		case '1':
			return true, true
		case '0':
			return false, true
		}
	case 2:
		if b[0]|0x20 == 'n' && b[1]|0x20 == 'o' {
			return false, true
		}
	case 3:
		if b[0]|0x20 == 'y' && b[1]|0x20 == 'e' && b[2]|0x20 == 's' {
			return true, true
		}
	case 4:
		if b[0]|0x20 == 't' && b[1]|0x20 == 'r' && b[2]|0x20 == 'u' && b[3]|0x20 == 'e' {
			return true, true
		}
	case 5:
		if b[0]|0x20 == 'f' && b[1]|0x20 == 'a' && b[2]|0x20 == 'l' && b[3]|0x20 == 's' && b[4]|0x20 == 'e' {
			return false, true
		}
	}
	return false, false
}

var pow10u64 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
	1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// decimalParts scans [+-]digits[.digits]: the sign, the significant integer digits (no
// leading zeros), and the fractional digits up to the last non-zero one. ok is false on any
// other syntax (an exponent goes to the slow path).
func decimalParts(b []byte) (neg bool, intd, fracd []byte, ok bool) {
	i := 0
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	s := i
	for i < len(b) && b[i]-'0' <= 9 {
		i++
	}
	intd = b[s:i]
	digits := i - s
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		fracd = b[f:i]
		digits += i - f
	}
	if i != len(b) || digits == 0 {
		return false, nil, nil, false
	}
	for len(intd) > 0 && intd[0] == '0' {
		intd = intd[1:]
	}
	for len(fracd) > 0 && fracd[len(fracd)-1] == '0' {
		fracd = fracd[:len(fracd)-1]
	}
	return neg, intd, fracd, true
}

// parseDecimal parses b as a decimal(prec, scale) value and returns its unscaled value as
// a 128-bit two's complement integer. Digits past the scale must be zeros (the value is
// exact or it is an error, never rounded), and the value must fit the precision.
func parseDecimal(b []byte, prec, scale int) (hi int64, lo uint64, ok bool, why string) {
	if prec <= 18 {
		if v, ok := decimalFast(b, prec, scale); ok {
			return v >> 63, uint64(v), true, ""
		}
	}
	return parseDecimalAny(b, prec, scale)
}

// parseDecimalAny is parseDecimal for every text.
func parseDecimalAny(b []byte, prec, scale int) (hi int64, lo uint64, ok bool, why string) {
	neg, intd, fracd, ok := decimalParts(b)
	if !ok {
		return parseDecimalSlow(b, prec, scale)
	}
	if len(fracd) > scale {
		return 0, 0, false, "more digits after the point than the scale " + strconv.Itoa(scale) + " (no rounding)"
	}
	if len(intd) > prec-scale {
		return 0, 0, false, "more than " + strconv.Itoa(prec-scale) + " digits before the point"
	}
	if prec <= 18 {
		var v uint64
		for _, c := range intd {
			v = v*10 + uint64(c-'0')
		}
		for _, c := range fracd {
			v = v*10 + uint64(c-'0')
		}
		v *= pow10u64[scale-len(fracd)]
		if neg && v != 0 {
			return -1, -v, true, ""
		}
		return 0, v, true, ""
	}
	var h, l uint64
	mul10 := func(d uint64) {
		ph, pl := bits.Mul64(l, 10)
		var c uint64
		l, c = bits.Add64(pl, d, 0)
		h = h*10 + ph + c
	}
	for _, c := range intd {
		mul10(uint64(c - '0'))
	}
	for _, c := range fracd {
		mul10(uint64(c - '0'))
	}
	for k := len(fracd); k < scale; k++ {
		mul10(0)
	}
	if neg {
		l = ^l + 1
		h = ^h
		if l == 0 {
			h++
		}
	}
	return int64(h), l, true, ""
}

// decimalFast reads the common decimal text, [+-]digits[.digits] with at most prec-scale
// digits before the point (leading zeros count) and at most scale after it, in one pass,
// for prec ≤ 18; ok is false for any other text, which parseDecimal then decides.
func decimalFast(b []byte, prec, scale int) (int64, bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	var v uint64
	s := i
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + uint64(c)
	}
	intd := i - s
	fracd := 0
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for ; i < len(b); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			v = v*10 + uint64(c)
		}
		fracd = i - f
	}
	if i != len(b) || intd+fracd == 0 || intd > prec-scale || fracd > scale {
		return 0, false
	}
	v *= pow10u64[scale-fracd] // at most prec ≤ 18 digits: no overflow
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// parseDecimalSlow handles exponent notation ("1.5e3") through math/big.
func parseDecimalSlow(b []byte, prec, scale int) (int64, uint64, bool, string) {
	if len(b) > 64 || !isExpLiteral(b) {
		return 0, 0, false, ""
	}
	var r big.Rat
	if _, ok := r.SetString(string(b)); !ok {
		return 0, 0, false, ""
	}
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		return 0, 0, false, "more digits after the point than the scale " + strconv.Itoa(scale) + " (no rounding)"
	}
	n := r.Num()
	lim := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)
	if new(big.Int).Abs(n).Cmp(lim) >= 0 {
		return 0, 0, false, "more than " + strconv.Itoa(prec-scale) + " digits before the point"
	}
	lo := new(big.Int).And(n, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(n, 64).Int64()
	return hi, lo, true, ""
}

// isExpLiteral reports whether b is [+-]digits[.digits](e|E)[+-]digits (big.Rat alone
// would also take "1/3" and "0x10").
func isExpLiteral(b []byte) bool {
	digits := func(i int) int {
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		return i
	}
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	j := digits(i)
	n := j - i
	if j < len(b) && b[j] == '.' {
		k := digits(j + 1)
		n += k - j - 1
		j = k
	}
	if n == 0 || j >= len(b) || (b[j] != 'e' && b[j] != 'E') {
		return false
	}
	j++
	if j < len(b) && (b[j] == '+' || b[j] == '-') {
		j++
	}
	k := digits(j)
	return k > j && k == len(b)
}

// Day arithmetic of the proleptic Gregorian calendar, without data-dependent branches
// (dates in a file are in no predictable order): per leap-ness, each month's length and
// the days of the year before it.
var (
	monthDays = [2][13]uint8{
		{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
		{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
	}
	daysBeforeMonth = [2][13]uint16{
		{0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334},
		{0, 0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335},
	}
)

// epochDay is the day number (from 0001-01-01 as 0) of 1970-01-01.
const epochDay = 719162

func b2u(b bool) uint64 {
	var x uint64
	if b {
		x = 1
	}
	return x
}

// leapYear is 1 for a leap year (y >= 1), else 0.
func leapYear(y uint64) uint64 {
	return b2u(y%4 == 0)&^b2u(y%100 == 0) | b2u(y%400 == 0)
}

// civilDays returns the days since 1970-01-01 of y-m-d, a valid date with y >= 1;
// leap is leapYear(y).
func civilDays(y, m, d, leap uint64) int64 {
	p := y - 1
	return int64(365*p+p/4-p/100+p/400+uint64(daysBeforeMonth[leap][m])+d-1) - epochDay
}

func digits2(b []byte, i int) (int, bool) {
	d0, d1 := b[i]-'0', b[i+1]-'0'
	return int(d0)*10 + int(d1), d0 <= 9 && d1 <= 9
}

// parseDate parses YYYY-MM-DD into days since the epoch.
func parseDate(b []byte) (int32, bool) {
	if len(b) != 10 {
		return 0, false
	}
	days, ok := dateDays(b)
	return int32(days), ok
}

func dateDays(b []byte) (int64, bool) {
	_ = b[9]
	y0, y1, y2, y3 := b[0]-'0', b[1]-'0', b[2]-'0', b[3]-'0'
	m0, m1, d0, d1 := b[5]-'0', b[6]-'0', b[8]-'0', b[9]-'0'
	if b[4] != '-' || b[7] != '-' || y0 > 9 || y1 > 9 || y2 > 9 || y3 > 9 || m0 > 1 || m1 > 9 || d0 > 3 || d1 > 9 {
		return 0, false
	}
	y := uint64(y0)*1000 + uint64(y1)*100 + uint64(y2)*10 + uint64(y3)
	m := uint64(m0)*10 + uint64(m1)
	d := uint64(d0)*10 + uint64(d1)
	if y == 0 || m-1 > 11 || d == 0 {
		return 0, false
	}
	leap := leapYear(y)
	if d > uint64(monthDays[leap][m]) {
		return 0, false
	}
	return civilDays(y, m, d, leap), true
}

const usPerDay = 86400 * 1000000

// parseTimestamp parses YYYY-MM-DD, optionally followed by [T or space]HH:MM[:SS[.fraction]]
// and a zone (Z, ±HH, ±HHMM or ±HH:MM), into microseconds since the epoch. Without a zone
// the time is a wall-clock time in loc (nil: UTC); with ntz the wall-clock time itself is
// the value and a zone is an error. Fractions finer than microseconds must be zeros.
func parseTimestamp(b []byte, loc *time.Location, ntz bool) (int64, bool, string) {
	if wall, zoned, ok := timestampFast(b); ok {
		if zoned && !ntz || !zoned && (ntz || loc == nil || loc == time.UTC) {
			return wall, true, ""
		}
	}
	return parseTimestampSlow(b, loc, ntz)
}

// timestampFast reads the most common shapes, YYYY-MM-DD[(T|t| )HH:MM:SS[(.|,)f{1,6}]][Z|z],
// with parseTimestamp's checks, into the wall-clock microseconds, and whether a Z ended
// the text. ok is false for any other shape and any bad value, which parseTimestampSlow
// then decides.
func timestampFast(b []byte) (wall int64, zoned, ok bool) {
	n := len(b)
	if n > 10 && (b[n-1] == 'Z' || b[n-1] == 'z') {
		zoned = true
		n--
	}
	if n != 10 && (n < 19 || n == 20 || n > 26) {
		return 0, false, false
	}
	b = b[:n]
	days, ok := dateDays(b)
	if !ok || n == 10 {
		return days * usPerDay, zoned, ok && !zoned
	}
	_ = b[18]
	if b[10] != 'T' && b[10] != ' ' && b[10] != 't' || b[13] != ':' || b[16] != ':' {
		return 0, false, false
	}
	h0, h1, m0, m1, s0, s1 := b[11]-'0', b[12]-'0', b[14]-'0', b[15]-'0', b[17]-'0', b[18]-'0'
	if h0 > 2 || h1 > 9 || m0 > 5 || m1 > 9 || s0 > 5 || s1 > 9 {
		return 0, false, false
	}
	h := int64(h0)*10 + int64(h1)
	if h > 23 {
		return 0, false, false
	}
	frac := int64(0)
	if n > 19 {
		if b[19] != '.' && b[19] != ',' {
			return 0, false, false
		}
		for _, c := range b[20:] {
			d := c - '0'
			if d > 9 {
				return 0, false, false
			}
			frac = frac*10 + int64(d)
		}
		frac *= int64(pow10u64[26-n])
	}
	wall = days*usPerDay + h*3600e6 + (int64(m0)*10+int64(m1))*60e6 + (int64(s0)*10+int64(s1))*1e6 + frac
	return wall, zoned, true
}

// parseTimestampSlow is parseTimestamp for every shape.
func parseTimestampSlow(b []byte, loc *time.Location, ntz bool) (int64, bool, string) {
	if len(b) < 10 {
		return 0, false, ""
	}
	days, ok := dateDays(b)
	if !ok {
		return 0, false, ""
	}
	var h, mi, s, frac int
	i := 10
	if i < len(b) && (b[i] == 'T' || b[i] == ' ' || b[i] == 't') {
		if len(b) < i+6 || b[i+3] != ':' {
			return 0, false, ""
		}
		var ok1, ok2 bool
		h, ok1 = digits2(b, i+1)
		mi, ok2 = digits2(b, i+4)
		if !ok1 || !ok2 || h > 23 || mi > 59 {
			return 0, false, ""
		}
		i += 6
		if i < len(b) && b[i] == ':' {
			if len(b) < i+3 {
				return 0, false, ""
			}
			s, ok1 = digits2(b, i+1)
			if !ok1 || s > 59 {
				return 0, false, ""
			}
			i += 3
			if i < len(b) && (b[i] == '.' || b[i] == ',') {
				i++
				n := 0
				for i < len(b) && b[i]-'0' <= 9 {
					if n < 6 {
						frac = frac*10 + int(b[i]-'0')
					} else if b[i] != '0' {
						return 0, false, "finer than microseconds"
					}
					n++
					i++
				}
				if n == 0 {
					return 0, false, ""
				}
				for ; n < 6; n++ {
					frac *= 10
				}
			}
		}
	}
	wall := days*usPerDay + int64(h)*3600e6 + int64(mi)*60e6 + int64(s)*1e6 + int64(frac)
	if i == len(b) {
		if ntz || loc == nil || loc == time.UTC {
			return wall, true, ""
		}
		y, m, d := int(b[0]-'0')*1000+int(b[1]-'0')*100+int(b[2]-'0')*10+int(b[3]-'0'), int(b[5]-'0')*10+int(b[6]-'0'), int(b[8]-'0')*10+int(b[9]-'0')
		t := time.Date(y, time.Month(m), d, h, mi, s, frac*1000, loc)
		return t.UnixMicro(), true, ""
	}
	if i == 10 { // a zone needs a time
		return 0, false, ""
	}
	var off int
	switch c := b[i]; c {
	case 'Z', 'z':
		if i+1 != len(b) {
			return 0, false, ""
		}
	case '+', '-':
		z := b[i+1:]
		var oh, om int
		var ok1, ok2 = false, true
		switch len(z) {
		case 2:
			oh, ok1 = digits2(z, 0)
		case 4:
			oh, ok1 = digits2(z, 0)
			om, ok2 = digits2(z, 2)
		case 5:
			if z[2] != ':' {
				return 0, false, ""
			}
			oh, ok1 = digits2(z, 0)
			om, ok2 = digits2(z, 3)
		}
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false, ""
		}
		off = oh*3600 + om*60
		if c == '-' {
			off = -off
		}
	default:
		return 0, false, ""
	}
	if ntz {
		return 0, false, "has a zone offset; timestamp_ntz holds wall-clock times"
	}
	return wall - int64(off)*1e6, true, ""
}

// parseTimestampLayout parses with a Go time layout (the slow path for timestamp_format).
func parseTimestampLayout(b []byte, layout string, loc *time.Location, ntz bool) (int64, bool, string) {
	if loc == nil || ntz {
		loc = time.UTC
	}
	t, err := time.ParseInLocation(layout, bstr(b), loc)
	if err != nil {
		return 0, false, ""
	}
	if t.Nanosecond()%1000 != 0 {
		return 0, false, "finer than microseconds"
	}
	if ntz {
		_, off := t.Zone()
		return t.UnixMicro() + int64(off)*1e6, true, ""
	}
	return t.UnixMicro(), true, ""
}

// fastLayouts are timestamp_format layouts that parseTimestamp reads exactly (it accepts
// a superset of each), so they skip time.Parse.
var fastLayouts = map[string]bool{
	time.RFC3339:                       true,
	time.RFC3339Nano:                   true,
	time.DateTime:                      true,
	time.DateOnly:                      true,
	"2006-01-02T15:04:05":              true,
	"2006-01-02 15:04:05.999999":       true,
	"2006-01-02 15:04:05.000000":       true,
	"2006-01-02T15:04:05.999999":       true,
	"2006-01-02T15:04:05.000000":       true,
	"2006-01-02T15:04:05Z":             true,
	"2006-01-02 15:04:05Z07:00":        true,
	"2006-01-02 15:04:05.999999Z07:00": true,
}
