package decode

import (
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fast parsers are checked against slow reference parsers (math/big, time.Parse,
// strconv) on random inputs.

var decimalSyntax = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// refDecimal parses s with big.Rat; ok false when s is not an exact decimal(p,s) value.
func refDecimal(s string, prec, scale int) (*big.Int, bool) {
	if !decimalSyntax.MatchString(s) {
		return nil, false
	}
	var r big.Rat
	if _, ok := r.SetString(s); !ok {
		return nil, false
	}
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		return nil, false
	}
	lim := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)
	if new(big.Int).Abs(r.Num()).Cmp(lim) >= 0 {
		return nil, false
	}
	return new(big.Int).Set(r.Num()), true
}

func randDecimalText(rng *rand.Rand) string {
	var sb strings.Builder
	switch rng.IntN(4) {
	case 0:
		sb.WriteByte('-')
	case 1:
		if rng.IntN(4) == 0 {
			sb.WriteByte('+')
		}
	}
	for range rng.IntN(40) {
		sb.WriteByte(byte('0' + rng.IntN(10)))
	}
	if rng.IntN(3) > 0 {
		sb.WriteByte('.')
		n := rng.IntN(12)
		for range n {
			sb.WriteByte(byte('0' + rng.IntN(10)))
		}
		if rng.IntN(3) == 0 { // trailing zeros beyond the scale are exact
			sb.WriteString("000")
		}
	}
	s := sb.String()
	if rng.IntN(20) == 0 && len(s) > 0 { // a stray character
		i := rng.IntN(len(s))
		s = s[:i] + string("x,e 1"[rng.IntN(5)]) + s[i+1:]
	}
	return s
}

func TestParseDecimalAgainstBigRat(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 200000 {
		prec := 1 + rng.IntN(38)
		scale := rng.IntN(prec + 1)
		s := randDecimalText(rng)
		if i%3 == 0 { // shorter numbers hit the limits more often
			s = s[:min(len(s), prec+3)]
		}
		want, wantOK := refDecimal(s, prec, scale)
		hi, lo, ok, _ := parseDecimal([]byte(s), prec, scale)
		if ok != wantOK {
			t.Fatalf("parseDecimal(%q, %d, %d) ok=%v, big.Rat says %v", s, prec, scale, ok, wantOK)
		}
		if !ok {
			continue
		}
		got := new(big.Int).Lsh(big.NewInt(hi), 64)
		got.Add(got, new(big.Int).SetUint64(lo))
		if got.Cmp(want) != 0 {
			t.Fatalf("parseDecimal(%q, %d, %d) = %s, want %s", s, prec, scale, got, want)
		}
	}
}

func TestParseDecimalExponent(t *testing.T) {
	tests := []struct {
		in         string
		prec, sc   int
		want       int64
		ok         bool
		whyContain string
	}{
		{"1.5e2", 10, 2, 15000, true, ""},
		{"-1E-2", 10, 2, -1, true, ""},
		{"1e-3", 10, 2, 0, false, "scale"},
		{"1e9", 10, 2, 0, false, "before the point"},
		{"1/2", 10, 2, 0, false, ""},
		{"0x10", 10, 2, 0, false, ""},
	}
	for _, tt := range tests {
		hi, lo, ok, why := parseDecimal([]byte(tt.in), tt.prec, tt.sc)
		if ok != tt.ok || (ok && (int64(lo) != tt.want || hi != tt.want>>63)) || !strings.Contains(why, tt.whyContain) {
			t.Errorf("parseDecimal(%q) = %d,%d,%v,%q; want %d ok=%v why~%q", tt.in, hi, lo, ok, why, tt.want, tt.ok, tt.whyContain)
		}
	}
}

func TestParseIntAgainstStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var sb strings.Builder
		if rng.IntN(3) == 0 {
			sb.WriteByte("+-"[rng.IntN(2)])
		}
		for range rng.IntN(22) {
			sb.WriteByte(byte('0' + rng.IntN(10)))
		}
		s := sb.String()
		if rng.IntN(30) == 0 && len(s) > 0 {
			s = s[:len(s)-1] + "."
		}
		for _, bits := range []int{8, 16, 32, 64} {
			want, err := strconv.ParseInt(s, 10, bits)
			got, ok, _ := parseInt([]byte(s), bits)
			if ok != (err == nil) || (ok && got != want) {
				t.Fatalf("parseInt(%q, %d) = %d,%v; strconv: %d,%v", s, bits, got, ok, want, err)
			}
		}
	}
}

func TestParseTimestampAgainstTimeParse(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	layouts := []struct {
		layout string
		zoned  bool
	}{
		{"2006-01-02T15:04:05Z07:00", true},
		{"2006-01-02T15:04:05.999999Z07:00", true},
		{"2006-01-02 15:04:05-0700", true},
		{"2006-01-02T15:04:05-07", true},
		{"2006-01-02 15:04:05", false},
		{"2006-01-02 15:04:05.000000", false},
		{"2006-01-02T15:04:05.999", false},
		{"2006-01-02 15:04", false},
		{"2006-01-02", false},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200000 {
		l := layouts[rng.IntN(len(layouts))]
		zone := time.FixedZone("", (rng.IntN(27*4)-14*4)*15*60)
		if l.layout == "2006-01-02T15:04:05-07" {
			zone = time.FixedZone("", (rng.IntN(27)-14)*3600)
		}
		tm := time.Date(1+rng.IntN(9999), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60),
			rng.IntN(60), rng.IntN(1000000)*1000, zone)
		s := tm.Format(l.layout)
		damaged := i%2 == 0
		if damaged { // random damage
			b := []byte(s)
			b[rng.IntN(len(b))] = "0123456789:-T .Zx"[rng.IntN(17)]
			s = string(b)
		}
		for _, ntz := range []bool{false, true} {
			loc := ny
			if ntz {
				loc = time.UTC
			}
			ref, rerr := time.ParseInLocation(l.layout, s, loc)
			got, ok, _ := parseTimestamp([]byte(s), ny, ntz)
			switch {
			case ok && rerr != nil:
				// The fast parser takes more shapes than one layout (any zone form, 'T' or
				// space); it must still agree with the layout the text does match.
				alt, aerr := parseAnyLayout(s, loc)
				if aerr != nil {
					t.Fatalf("parseTimestamp(%q, ntz=%v) accepted %d; time.Parse: %v", s, ntz, got, rerr)
				}
				if want := micros(alt, ntz); got != want {
					t.Fatalf("parseTimestamp(%q, ntz=%v) = %d, want %d", s, ntz, got, want)
				}
			case ok:
				if want := micros(ref, ntz); got != want {
					t.Fatalf("parseTimestamp(%q, ntz=%v) = %d, want %d (%s)", s, ntz, got, want, ref)
				}
			case !damaged && !(ntz && l.zoned):
				t.Fatalf("parseTimestamp(%q, ntz=%v) rejected what time.Parse reads as %s", s, ntz, ref)
			}
		}
	}
}

func micros(t time.Time, ntz bool) int64 {
	if ntz {
		_, off := t.Zone()
		return t.UnixMicro() + int64(off)*1e6
	}
	return t.UnixMicro()
}

func parseAnyLayout(s string, loc *time.Location) (time.Time, error) {
	var err error
	for _, l := range []string{"2006-01-02T15:04Z07:00", "2006-01-02 15:04Z07:00", "2006-01-02T15:04Z0700",
		"2006-01-02 15:04Z0700", "2006-01-02T15:04Z07", "2006-01-02 15:04Z07", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z0700", "2006-01-02 15:04:05.999999999Z0700",
		"2006-01-02T15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07",
		"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		var t time.Time
		if t, err = time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

func TestParseDateAgainstTimeParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 100000 {
		s := strconv.Itoa(1000 + rng.IntN(9000))
		s += "-" + two(1+rng.IntN(13)) + "-" + two(1+rng.IntN(32))
		ref, rerr := time.Parse(time.DateOnly, s)
		got, ok := parseDate([]byte(s))
		if ok != (rerr == nil) || (ok && int64(got) != ref.Unix()/86400) {
			t.Fatalf("parseDate(%q) = %d,%v; time.Parse: %v,%v", s, got, ok, ref, rerr)
		}
	}
	for _, s := range []string{"0001-01-01", "9999-12-31", "1969-12-31", "2000-02-29"} {
		ref, _ := time.Parse(time.DateOnly, s)
		got, ok := parseDate([]byte(s))
		if !ok || int64(got) != ref.Unix()/86400 {
			t.Errorf("parseDate(%q) = %d,%v; want %d", s, got, ok, ref.Unix()/86400)
		}
	}
}

func two(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// TestFastParsersAgree checks the fast paths of parseTimestamp and parseDecimal against
// the parsers for every text, on well-formed and damaged values: same value, same
// verdict.
func TestFastParsersAgree(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	damage := func(s string) string {
		if rng.IntN(2) == 0 || s == "" {
			return s
		}
		b := []byte(s)
		switch rng.IntN(3) {
		case 0:
			b[rng.IntN(len(b))] = "0123456789:-+T .,Zzx/"[rng.IntN(21)]
		case 1:
			b = b[:rng.IntN(len(b))]
		default:
			i := rng.IntN(len(b) + 1)
			b = append(b[:i], append([]byte{"0123456789:-.Z"[rng.IntN(14)]}, b[i:]...)...)
		}
		return string(b)
	}
	layouts := []string{"2006-01-02T15:04:05.000000Z", "2006-01-02T15:04:05.999999Z07:00", "2006-01-02 15:04:05",
		"2006-01-02t15:04:05,000Z", "2006-01-02", "2006-01-02T15:04:05Z", "2006-01-02 15:04:05.9"}
	for range 300000 {
		tm := time.Date(1+rng.IntN(9999), time.Month(1+rng.IntN(12)), 1+rng.IntN(31), rng.IntN(24), rng.IntN(60),
			rng.IntN(60), rng.IntN(1000000)*1000, time.UTC)
		s := damage(tm.Format(layouts[rng.IntN(len(layouts))]))
		for _, loc := range []*time.Location{nil, time.UTC, ny} {
			for _, ntz := range []bool{false, true} {
				got, ok, why := parseTimestamp([]byte(s), loc, ntz)
				want, wok, wwhy := parseTimestampSlow([]byte(s), loc, ntz)
				if got != want || ok != wok || why != wwhy {
					t.Fatalf("parseTimestamp(%q, %v, ntz=%v) = %d,%v,%q; parseTimestampSlow: %d,%v,%q", s, loc, ntz, got, ok, why, want, wok, wwhy)
				}
			}
		}
	}
	for range 300000 {
		prec := 1 + rng.IntN(20)
		scale := rng.IntN(prec + 1)
		s := strconv.FormatInt(rng.Int64N(2_000_000_000_000_000_000)-1_000_000_000_000_000_000, 10)
		s = s[:1+rng.IntN(len(s))]
		if rng.IntN(3) > 0 {
			s += "." + strconv.Itoa(1000000 + rng.IntN(1000000))[1:2+rng.IntN(3)]
		}
		if rng.IntN(4) == 0 {
			s = strings.Repeat("0", rng.IntN(3)) + s
		}
		s = damage(s)
		hi, lo, ok, why := parseDecimal([]byte(s), prec, scale)
		whi, wlo, wok, wwhy := parseDecimalAny([]byte(s), prec, scale)
		if hi != whi || lo != wlo || ok != wok || why != wwhy {
			t.Fatalf("parseDecimal(%q, %d, %d) = %d,%d,%v,%q; parseDecimalAny: %d,%d,%v,%q", s, prec, scale, hi, lo, ok, why, whi, wlo, wok, wwhy)
		}
	}
}

// benchValues are n texts of random values, as a column of a file has them (benchmarks
// of one repeated text measure branches that never mispredict).
func benchValues(n int, gen func(rng *rand.Rand) string) [][]byte {
	rng := rand.New(rand.NewPCG(13, 14))
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(gen(rng))
	}
	return out
}

func BenchmarkParseTimestamp(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	vals := benchValues(4096, func(rng *rand.Rand) string {
		return time.UnixMicro(t0 + rng.Int64N(90*86400e6)).UTC().Format("2006-01-02T15:04:05.000000Z")
	})
	i := 0
	for b.Loop() {
		parseTimestamp(vals[i&4095], time.UTC, false)
		i++
	}
}

func BenchmarkParseDecimal(b *testing.B) {
	vals := benchValues(4096, func(rng *rand.Rand) string {
		return strconv.Itoa(rng.IntN(100000)) + "." + strconv.Itoa(10+rng.IntN(90))
	})
	i := 0
	for b.Loop() {
		parseDecimal(vals[i&4095], 10, 2)
		i++
	}
}
