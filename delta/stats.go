package delta

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// DefaultNumIndexedCols is delta.dataSkippingNumIndexedCols's default: stats cover the
// first 32 leaf columns.
const DefaultNumIndexedCols = 32

// statsStringPrefix is how many characters of a string min/max are kept.
const statsStringPrefix = 32

// fileStats accumulates the per-file statistics of one data file (PROTOCOL.md §Per-file
// Statistics) over the batches written to it. Min/max are computed directly over Arrow
// arrays, without boxing values.
type fileStats struct {
	numRecords int64
	root       *statsNode
}

// statsNode mirrors the data schema: a struct node has children; a leaf accumulates.
type statsNode struct {
	name     string
	children []*statsNode // struct
	leaf     *leafStats   // non-struct column; nil for an unindexed column
}

// leafStats is the accumulator of one leaf column.
type leafStats struct {
	kind      statsKind
	scale     int32 // decimals
	bits      int   // floats: 32 or 64, for printing
	nullCount int64
	has       bool // min/max seen
	noMinMax  bool // a NaN or an unsupported type: omit min/max
	// byWriter: a string column's min and max come from the Parquet writer, which
	// orders the values for the file's own statistics (setBytesRange), not from update.
	byWriter bool
	minI     int64
	maxI     int64
	minF     float64
	maxF     float64
	minS     string
	maxS     string
	minD     decimal128.Num
	maxD     decimal128.Num
}

type statsKind int

const (
	kindNone    statsKind = iota // null count only (binary, boolean, array, map)
	kindInt                      // byte, short, integer, long
	kindFloat                    // float, double
	kindString                   // string
	kindDate                     // date32 days
	kindTS                       // timestamp[us, UTC]
	kindTSNTZ                    // timestamp[us]
	kindDecimal                  // decimal128
)

// newFileStats prepares an accumulator for the data columns of schema (partition columns
// excluded); only the first numIndexed leaf columns get stats (negative: all).
func newFileStats(schema *StructType, numIndexed int) *fileStats {
	if numIndexed < 0 {
		numIndexed = math.MaxInt
	}
	budget := numIndexed
	return &fileStats{root: buildStatsNode("", &StructType{Fields: schema.Fields}, &budget)}
}

func buildStatsNode(name string, t DataType, budget *int) *statsNode {
	n := &statsNode{name: name}
	if st, ok := t.(*StructType); ok {
		for _, f := range st.Fields {
			// Stats name a column as its file does: by physical name (column mapping).
			n.children = append(n.children, buildStatsNode(physicalName(f), f.Type, budget))
		}
		return n
	}
	if *budget <= 0 {
		return n
	}
	*budget--
	ls := &leafStats{kind: kindNone}
	switch v := t.(type) {
	case *PrimitiveType:
		switch v.Name {
		case TypeByte, TypeShort, TypeInteger, TypeLong:
			ls.kind = kindInt
		case TypeFloat:
			ls.kind, ls.bits = kindFloat, 32
		case TypeDouble:
			ls.kind, ls.bits = kindFloat, 64
		case TypeString:
			ls.kind = kindString
		case TypeDate:
			ls.kind = kindDate
		case TypeTimestamp:
			ls.kind = kindTS
		case TypeTimestampNTZ:
			ls.kind = kindTSNTZ
		}
	case *DecimalType:
		ls.kind = kindDecimal
		ls.scale = int32(v.Scale)
	}
	n.leaf = ls
	return n
}

// update folds one record (already conformed to the data schema) into the stats.
func (s *fileStats) update(rec arrow.RecordBatch) {
	s.numRecords += rec.NumRows()
	for i, c := range s.root.children {
		c.update(rec.Column(i), nil)
	}
}

// update folds arr into the node. valid, when not nil, is the combined validity of the
// enclosing structs (a value is null when an ancestor is).
func (n *statsNode) update(arr arrow.Array, valid []bool) {
	if n.children != nil {
		st := arr.(*array.Struct)
		v := valid
		if st.NullN() > 0 {
			v = make([]bool, st.Len())
			for i := range v {
				v[i] = st.IsValid(i) && (valid == nil || valid[i])
			}
		}
		for i, c := range n.children {
			c.update(st.Field(i), v)
		}
		return
	}
	if n.leaf != nil {
		n.leaf.update(arr, valid)
	}
}

func (l *leafStats) update(arr arrow.Array, valid []bool) {
	nulls := arr.NullN()
	if valid != nil {
		nulls = 0
		for i := range valid {
			if !valid[i] || arr.IsNull(i) {
				nulls++
			}
		}
	}
	l.nullCount += int64(nulls)
	if l.kind == kindNone || l.noMinMax || l.byWriter || nulls == arr.Len() {
		return
	}
	ok := func(i int) bool { return arr.IsValid(i) && (valid == nil || valid[i]) }
	if nulls == 0 {
		ok = nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		foldInts(l, a.Int64Values(), ok)
	case *array.Int32:
		foldInts(l, a.Int32Values(), ok)
	case *array.Int16:
		foldInts(l, a.Int16Values(), ok)
	case *array.Int8:
		foldInts(l, a.Int8Values(), ok)
	case *array.Date32:
		foldInts(l, a.Date32Values(), ok)
	case *array.Timestamp:
		foldInts(l, a.TimestampValues(), ok)
	case *array.Float64:
		foldFloats(l, a.Float64Values(), ok)
	case *array.Float32:
		foldFloats(l, a.Float32Values(), ok)
	case *array.String:
		l.foldStrings(a, ok)
	case *array.Decimal128:
		l.foldDecimals(a, ok)
	default:
		l.noMinMax = true
	}
}

func foldInts[T ~int8 | ~int16 | ~int32 | ~int64](l *leafStats, vals []T, ok func(int) bool) {
	var mn, mx int64
	first := true
	if l.has {
		mn, mx, first = l.minI, l.maxI, false
	}
	for i, v := range vals {
		if ok != nil && !ok(i) {
			continue
		}
		x := int64(v)
		if first {
			mn, mx, first = x, x, false
			continue
		}
		if x < mn {
			mn = x
		}
		if x > mx {
			mx = x
		}
	}
	if !first {
		l.minI, l.maxI, l.has = mn, mx, true
	}
}

func foldFloats[T float32 | float64](l *leafStats, vals []T, ok func(int) bool) {
	mn, mx := math.Inf(1), math.Inf(-1)
	if l.has {
		mn, mx = l.minF, l.maxF
	}
	seen := false
	for i, v := range vals {
		if ok != nil && !ok(i) {
			continue
		}
		x := float64(v)
		if x != x { // NaN sorts above everything in Spark; no bound can be stated
			l.noMinMax = true
			return
		}
		seen = true
		if x < mn {
			mn = x
		}
		if x > mx {
			mx = x
		}
	}
	if seen {
		l.minF, l.maxF, l.has = mn, mx, true
	}
}

// setBytesRange sets a string column's min and max (byWriter) from the least and
// greatest of its values as the Parquet writer found them (has: any value).
func (l *leafStats) setBytesRange(min, max []byte, has bool) {
	if has {
		l.minS, l.maxS, l.has = string(min), string(max), true
	}
}

func (l *leafStats) foldStrings(a *array.String, ok func(int) bool) {
	// Straight over the offsets and data (no string headers), with a running min/max
	// and their 16-byte keys (the first 16 bytes, zero-padded, as two big-endian
	// numbers): a key strictly between theirs, below the min's or above the max's decides
	// by itself (ids that share a prefix, rising ids); only a key equal to one of theirs
	// costs a byte comparison (constant columns, runs).
	offs := a.ValueOffsets()
	data := a.ValueBytes() // starts at the array's first expr.Value
	base := offs[0]
	n := a.Len()
	if ok == nil && arrowx.OneValue(offs, data) {
		n = 1 // every expr.Value is the first
	}
	var mn, mx []byte
	var mnh, mnl, mxh, mxl uint64 // the keys of mn and mx
	seen := false
	for i := 0; i < n; i++ {
		if ok != nil && !ok(i) {
			continue
		}
		v := data[offs[i]-base : offs[i+1]-base]
		h, lo := pqfile.SortKey16(v)
		if !seen {
			mn, mx, mnh, mnl, mxh, mxl, seen = v, v, h, lo, h, lo, true
			continue
		}
		aboveMin := h > mnh || h == mnh && lo > mnl
		belowMax := h < mxh || h == mxh && lo < mxl
		if aboveMin && belowMax {
			continue
		}
		if !aboveMin && (h != mnh || lo != mnl) { // strictly below the min
			mn, mnh, mnl = v, h, lo
			continue
		}
		if !belowMax && (h != mxh || lo != mxl) { // strictly above the max
			mx, mxh, mxl = v, h, lo
			continue
		}
		if !aboveMin { // the min's key
			c := bytes.Compare(v, mn)
			if c < 0 {
				mn = v
			}
			if c <= 0 { // not above the min, so not above the max
				continue
			}
		}
		if !belowMax && bytes.Compare(v, mx) > 0 { // the max's key
			mx = v
		}
	}
	if !seen {
		return
	}
	// mn and mx alias the array's buffer: copy only the winners.
	if !l.has || string(mn) < l.minS {
		l.minS = string(mn)
	}
	if !l.has || string(mx) > l.maxS {
		l.maxS = string(mx)
	}
	l.has = true
}

func (l *leafStats) foldDecimals(a *array.Decimal128, ok func(int) bool) {
	for i := 0; i < a.Len(); i++ {
		if ok != nil && !ok(i) {
			continue
		}
		v := a.Value(i)
		if !l.has {
			l.minD, l.maxD, l.has = v, v, true
			continue
		}
		if v.Less(l.minD) {
			l.minD = v
		}
		if v.Greater(l.maxD) {
			l.maxD = v
		}
	}
}

// JSON renders the stats string of an add action: {"numRecords","minValues","maxValues",
// "nullCount"}, nested like the schema, with only the columns that have a value.
func (s *fileStats) JSON() string {
	var b bytes.Buffer
	b.WriteString(`{"numRecords":`)
	b.WriteString(strconv.FormatInt(s.numRecords, 10))
	for _, part := range []struct {
		key  string
		emit func(*leafStats, *bytes.Buffer) bool
	}{
		{"minValues", func(l *leafStats, b *bytes.Buffer) bool { return l.writeBound(b, false) }},
		{"maxValues", func(l *leafStats, b *bytes.Buffer) bool { return l.writeBound(b, true) }},
		{"nullCount", func(l *leafStats, b *bytes.Buffer) bool {
			b.WriteString(strconv.FormatInt(l.nullCount, 10))
			return true
		}},
	} {
		b.WriteString(`,"` + part.key + `":`)
		if !s.root.writeJSON(&b, part.emit) {
			b.WriteString("{}")
		}
	}
	b.WriteByte('}')
	return b.String()
}

// writeJSON writes the node's object (struct) or value (leaf); it reports false, writing
// nothing, when there is nothing to say.
func (n *statsNode) writeJSON(b *bytes.Buffer, emit func(*leafStats, *bytes.Buffer) bool) bool {
	if n.children == nil {
		if n.leaf == nil {
			return false
		}
		return emit(n.leaf, b)
	}
	start := b.Len()
	b.WriteByte('{')
	wrote := false
	for _, c := range n.children {
		mark := b.Len()
		if wrote {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(c.name)
		b.Write(key)
		b.WriteByte(':')
		if c.writeJSON(b, emit) {
			wrote = true
		} else {
			b.Truncate(mark)
		}
	}
	if !wrote {
		b.Truncate(start)
		return false
	}
	b.WriteByte('}')
	return true
}

func (l *leafStats) writeBound(b *bytes.Buffer, isMax bool) bool {
	if !l.has || l.noMinMax {
		return false
	}
	switch l.kind {
	case kindInt:
		b.WriteString(strconv.FormatInt(pick(isMax, l.maxI, l.minI), 10))
	case kindFloat:
		v := pick(isMax, l.maxF, l.minF)
		if math.IsInf(v, 0) {
			return false
		}
		b.WriteString(strconv.FormatFloat(v, 'g', -1, l.bits))
	case kindDate:
		b.WriteString(`"` + time.Unix(pick(isMax, l.maxI, l.minI)*86400, 0).UTC().Format("2006-01-02") + `"`)
	case kindTS, kindTSNTZ:
		layout := "2006-01-02T15:04:05.000Z07:00"
		if l.kind == kindTSNTZ {
			layout = "2006-01-02T15:04:05.000"
		}
		// Truncated to milliseconds (floor): the max may be up to 999µs below the true max;
		// readers widen it when pruning.
		b.WriteString(`"` + time.UnixMicro(pick(isMax, l.maxI, l.minI)).UTC().Format(layout) + `"`)
	case kindString:
		v, ok := truncateStat(pick(isMax, l.maxS, l.minS), isMax)
		if !ok {
			return false
		}
		q, _ := json.Marshal(v)
		b.Write(q)
	case kindDecimal:
		b.WriteString(pick(isMax, l.maxD, l.minD).ToString(l.scale))
	default:
		return false
	}
	return true
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

// truncateStat cuts a string statistic to statsStringPrefix characters. A min prefix is
// still ≤ the true min. A max gets U+10FFFF appended after the prefix, as Delta-Spark does,
// so it stays ≥ every string with that prefix; when the next character is itself U+10FFFF
// no such bound fits in the prefix and the max is omitted (ok false).
func truncateStat(s string, isMax bool) (string, bool) {
	if utf8.RuneCountInString(s) <= statsStringPrefix {
		return s, true
	}
	cut, n := 0, 0
	for i := range s {
		if n == statsStringPrefix {
			cut = i
			break
		}
		n++
	}
	if !isMax {
		return s[:cut], true
	}
	if r, _ := utf8.DecodeRuneInString(s[cut:]); r == utf8.MaxRune {
		return "", false
	}
	return s[:cut] + string(utf8.MaxRune), true
}
