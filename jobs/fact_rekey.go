package jobs

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// Re-keying: the facts in the ranges where a dimension's valid version changed are
// looked up again, and those whose key changed are updated.

// changes reads the moved dimensions' change feeds: per lookup, the changed ranges of
// its business keys (nil: not moved), and whether every fact must be looked up again
// (a new lookup, or a feed that cannot be read).
func (fr *factRun) changes(ctx context.Context, moved []bool, lastDim []int64, res *Result) (ranges []map[string][]dimInterval, all bool, err error) {
	ranges = make([]map[string][]dimInterval, len(fr.dims))
	for i, d := range fr.dims {
		if !moved[i] {
			continue
		}
		if lastDim[i] < 0 {
			all = true // never keyed by this dimension (a new lookup)
			continue
		}
		rs, ok, err := d.changedRanges(ctx, lastDim[i])
		if err != nil {
			return nil, false, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		if !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("the change feed of %s over versions %d..%d cannot be read: every fact is looked up again", d.decl.Name, lastDim[i]+1, d.snap.Version()))
			all = true
			continue
		}
		res.ChangesRead = append(res.ChangesRead, ChangeRange{Table: d.decl.Name, After: lastDim[i], Through: d.snap.Version()})
		ranges[i] = rs
	}
	return ranges, all, nil
}

// rekey looks the facts in the dimensions' changed ranges (all: every fact) up again
// and emits those whose key changed (facts this run already emits are keyed already).
func (fr *factRun) rekey(ctx context.Context, f *flow, ranges []map[string][]dimInterval, all bool, res *Result) error {
	if !all && !slices.ContainsFunc(ranges, func(m map[string][]dimInterval) bool { return len(m) > 0 }) {
		return nil
	}
	// FilesOnly: a file's row groups that are read are read whole, so each row's place
	// in its file is known (the positions the MERGE updates the re-keyed facts at);
	// those outside the changed ranges' times are skipped by their stats (RowGroups).
	// Of the rows read, the scan keeps (Pick) those in a changed range by their times,
	// then by their keys, and decodes their other columns for those rows alone.
	opts := delta.ScanOptions{FilesOnly: true, RowGroups: true, ReadAhead: true}
	if !all {
		opts.Filter = fr.rekeyFilter(ranges)
		opts.Pick = newRekeyPicker(fr.dims, ranges).steps()
	}
	sc, err := f.dstSnap.Scan(ctx, opts)
	if err != nil {
		return fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	defer sc.Release()
	keepRows := fr.pos != nil && f.dstSnap.DeletionVectorsEnabled()
	what := "fact table " + f.dstDecl.Name
	var rows []int32
	for sc.Next() {
		rec := sc.RecordBatch()
		n := int(rec.NumRows())
		file, first, posOK := sc.Position()
		if !posOK {
			fr.pos = nil
		}
		places := sc.Rows() // (with Pick: each row's place in its file)
		names := nameIndex(rec.Schema())
		cols := make([]int, len(fr.keyOf))
		for j := range cols {
			cols[j] = names[strings.ToLower(fr.out.Field(j).Name)]
		}
		rows = rows[:0]
		for r := range n {
			key, kc, err := fr.factKey(rec, cols, r)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if fr.emitted(key) {
				continue
			}
			sks, err := fr.keysFor(rec, kc, r)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			same := true
			for i, l := range fr.s.cfg.Lookups {
				c := rec.Column(names[strings.ToLower(l.Key)])
				same = same && !c.IsNull(r) && c.(*array.Int64).Value(r) == sks[i]
			}
			if same {
				continue // looked up, unchanged: not counted, not written
			}
			fr.tally()
			fr.seen.Add(key)
			if fr.pos != nil {
				fm := fr.pos.Files[file.Path]
				if fm == nil {
					fm = &delta.FileMatches{}
					fr.pos.Files[file.Path] = fm
				}
				at := first + int64(r)
				if places != nil {
					at = places[r]
				}
				fm.Target = append(fm.Target, at)
				fm.Source = append(fm.Source, int32(fr.rows))
				rows = append(rows, int32(r))
			}
			if err := fr.emit(rec, cols, r, sks, false); err != nil {
				return err
			}
		}
		if keepRows && len(rows) > 0 {
			// The re-keyed facts as they are, so that the MERGE does not read their file.
			held, err := arrowx.GatherRows(ctx, rec, rows)
			if err != nil {
				return err
			}
			fm := fr.pos.Files[file.Path]
			fm.Rows = append(fm.Rows, held)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	st := sc.Stats()
	res.FilesRead += int64(st.FilesRead)
	note := fmt.Sprintf("re-keying read %d of the fact table's %d files", st.FilesRead, st.FilesTotal)
	if st.RowGroupsPruned > 0 {
		note += fmt.Sprintf(" (%d row groups skipped by their stats)", st.RowGroupsPruned)
	}
	res.Notes = append(res.Notes, note)
	return nil
}

// changedKeys are one dimension's changed business keys (a key index) and, per key id,
// its changed ranges; from and to bound them all.
type changedKeys struct {
	keys     *keyindex.Index
	ranges   [][]dimInterval
	from, to int64
	// bits has, for keys of one string or integer column, a bit per key's value hash:
	// a fact whose value's bit is clear has no changed key, and is not looked up (no
	// words: every fact in the bounds is).
	bits hashBits
	// before are the surrogate keys a fact in a changed range may hold (factDim.before,
	// and the lookup's unknown key).
	before skSet
}

func newChangedKeys(d *factDim, rs map[string][]dimInterval) *changedKeys {
	c := &changedKeys{keys: keyindex.New(len(rs)), ranges: make([][]dimInterval, 0, len(rs)), from: math.MaxInt64, to: math.MinInt64,
		bits: newHashBits(len(rs)), before: newSKSet(append(slices.Clone(d.before), d.lookup.unknownKey()))}
	for k, r := range rs {
		c.keys.Add([]byte(k))
		c.ranges = append(c.ranges, r)
		for _, iv := range r {
			c.from, c.to = min(c.from, iv.from), max(c.to, iv.to)
		}
		switch v, _ := decodeKeyValue(k); v := v.(type) {
		case string:
			c.bits.set(maphash.String(changedSeed, v))
		case int64:
			c.bits.set(intHash(v))
		default:
			c.bits.words = nil
		}
	}
	return c
}

// changedSeed seeds the hashes of changedKeys.bits.
var changedSeed = maphash.MakeSeed()

// hashBits is a set's bit per value hash (the hash's top bits pick it), about 64 bits a
// value in a power of two of words: a value whose bit is clear is not in the set.
type hashBits struct {
	words []uint64
	shift uint
}

func newHashBits(values int) hashBits {
	n := bitutil.NextPowerOf2(max(values, 1))
	return hashBits{words: make([]uint64, n), shift: uint(64 - bits.TrailingZeros(uint(n*64)))}
}

func (b hashBits) set(h uint64) {
	if b.words != nil {
		i := h >> b.shift
		b.words[i/64] |= 1 << (i % 64)
	}
}

func (b hashBits) has(h uint64) bool {
	i := h >> b.shift
	return b.words[i/64]&(1<<(i%64)) != 0
}

// mayHold reports whether row r of a fact's one key column may hold a changed key
// (false: it does not).
func (c *changedKeys) mayHold(col arrow.Array, r int) bool {
	var h uint64
	switch a := col.(type) {
	case *array.String:
		h = maphash.String(changedSeed, a.Value(r))
	case *array.Int64:
		h = intHash(a.Value(r))
	case *array.Int32:
		h = intHash(int64(a.Value(r)))
	default:
		return true
	}
	return c.bits.has(h)
}

// skSet is a set of surrogate keys: their hash bits in front of a map (the bits keep
// out nearly every key not in it, at a bit test each).
type skSet struct {
	bits hashBits
	keys map[int64]struct{}
}

func newSKSet(sks []int64) skSet {
	s := skSet{bits: newHashBits(len(sks)), keys: make(map[int64]struct{}, len(sks))}
	for _, k := range sks {
		s.bits.set(intHash(k))
		s.keys[k] = struct{}{}
	}
	return s
}

func (s skSet) has(k int64) bool {
	if !s.bits.has(intHash(k)) {
		return false
	}
	_, ok := s.keys[k]
	return ok
}

// intHash mixes an integer key's bits (Fibonacci hashing: the top bits are the mixed ones).
func intHash(v int64) uint64 { return uint64(v) * 0x9e3779b97f4a7c15 }

// rekeyPicker keeps the facts of a batch that fall in a changed range of one of the
// dimensions: first by their surrogate keys (those a fact in a changed range may hold),
// then by their times (the changed ranges' bounds), then by their business keys and
// times. The scan calls it on its own goroutines, several at once: each call takes
// buffers of its own, and only it looks the changed keys up.
type rekeyPicker struct {
	dims    []*factDim
	changed []*changedKeys // per lookup (nil: not changed)
	bufs    sync.Pool      // of *pickBuffers
}

type pickBuffers struct {
	times []int64
	tok   []bool
	block keyindex.Block
	in    []bool
}

func newRekeyPicker(dims []*factDim, ranges []map[string][]dimInterval) *rekeyPicker {
	p := &rekeyPicker{dims: dims, changed: make([]*changedKeys, len(dims))}
	p.bufs.New = func() any { return &pickBuffers{} }
	for i, rs := range ranges {
		if rs != nil {
			p.changed[i] = newChangedKeys(dims[i], rs)
		}
	}
	return p
}

// steps are the scan's Pick: the surrogate keys' columns, the times', then the
// business keys'.
func (p *rekeyPicker) steps() []delta.PickStep {
	var sks, at, keys []string
	for i, c := range p.changed {
		if c != nil {
			sks = append(sks, p.dims[i].lookup.Key)
			at = append(at, p.dims[i].lookup.At)
			keys = append(keys, p.dims[i].factCols...)
		}
	}
	return []delta.PickStep{{Columns: sks, Keep: p.bySK}, {Columns: at, Keep: p.byTime}, {Columns: keys, Keep: p.byKey}}
}

// bySK keeps the rows whose surrogate key of a changed lookup is one a fact in its
// changed ranges may hold, or NULL.
func (p *rekeyPicker) bySK(rec arrow.RecordBatch) ([]int32, error) {
	return p.mark(rec, func(b *pickBuffers, names map[string]int, i int, c *changedKeys) error {
		key := p.dims[i].lookup.Key
		a := rec.Column(names[strings.ToLower(key)])
		col, ok := a.(*array.Int64)
		if !ok {
			return fmt.Errorf("lookups[%d].key %s is %s; expected bigint", i, key, a.DataType())
		}
		if col.NullN() == 0 {
			for r, v := range col.Int64Values() {
				if c.before.has(v) {
					b.in[r] = true
				}
			}
			return nil
		}
		for r, v := range col.Int64Values() {
			b.in[r] = b.in[r] || col.IsNull(r) || c.before.has(v)
		}
		return nil
	})
}

// byTime keeps the rows whose time is within a changed lookup's ranges' bounds.
func (p *rekeyPicker) byTime(rec arrow.RecordBatch) ([]int32, error) {
	return p.mark(rec, func(b *pickBuffers, names map[string]int, i int, c *changedKeys) error {
		inBounds, err := p.inBounds(rec, b, names, i, c)
		if err != nil {
			return err
		}
		for r := range b.in {
			b.in[r] = b.in[r] || inBounds(r)
		}
		return nil
	})
}

// byKey keeps the rows whose business key and time fall in one of its changed ranges.
func (p *rekeyPicker) byKey(rec arrow.RecordBatch) ([]int32, error) {
	return p.mark(rec, func(b *pickBuffers, names map[string]int, i int, c *changedKeys) error {
		inBounds, err := p.inBounds(rec, b, names, i, c)
		if err != nil {
			return err
		}
		d := p.dims[i]
		cols := make([]int, len(d.factCols))
		for j, k := range d.factCols {
			cols[j] = names[strings.ToLower(k)]
		}
		// Only the keys of facts whose time is within the ranges' bounds, and whose
		// value may be a changed key's, are looked up.
		lookUp := inBounds
		if c.bits.words != nil && len(cols) == 1 {
			col := rec.Column(cols[0])
			lookUp = func(r int) bool { return inBounds(r) && c.mayHold(col, r) }
		}
		if err := appendBusinessKeysWhere(&b.block, rec, cols, lookUp); err != nil {
			return err
		}
		c.keys.LookupBlock(&b.block)
		for r, id := range b.block.IDs {
			if id >= 0 && b.tok[r] && inRanges(c.ranges[id], b.times[r]) {
				b.in[r] = true
			}
		}
		return nil
	})
}

// mark runs fn for each changed lookup i over rec, with buffers of its own (b.in
// cleared, a row of rec each), and returns the rows fn marked in b.in.
func (p *rekeyPicker) mark(rec arrow.RecordBatch, fn func(b *pickBuffers, names map[string]int, i int, c *changedKeys) error) ([]int32, error) {
	b := p.bufs.Get().(*pickBuffers)
	defer p.bufs.Put(b)
	b.in = resize(b.in, int(rec.NumRows()))
	clear(b.in)
	names := nameIndex(rec.Schema())
	for i, c := range p.changed {
		if c == nil {
			continue
		}
		if err := fn(b, names, i, c); err != nil {
			return nil, err
		}
	}
	var keep []int32
	for r, in := range b.in {
		if in {
			keep = append(keep, int32(r))
		}
	}
	return keep, nil
}

// inBounds reads lookup i's times of rec into b and returns whether row r's is within
// its changed ranges' bounds.
func (p *rekeyPicker) inBounds(rec arrow.RecordBatch, b *pickBuffers, names map[string]int, i int, c *changedKeys) (func(r int) bool, error) {
	at := p.dims[i].lookup.At
	var err error
	if b.times, b.tok, err = fillTimes(b.times, b.tok, rec.Column(names[strings.ToLower(at)]), int(rec.NumRows())); err != nil {
		return nil, fmt.Errorf("lookups[%d].at %s: %w", i, at, err)
	}
	return func(r int) bool { return b.tok[r] && c.from <= b.times[r] && b.times[r] < c.to }, nil
}

// rekeyFilter is a scan filter keeping the facts of the changed business keys (nil, no
// filter, when a lookup has a key of several columns).
func (fr *factRun) rekeyFilter(ranges []map[string][]dimInterval) expr.Predicate {
	var ors []expr.Predicate
	for i, d := range fr.dims {
		if ranges[i] == nil {
			continue
		}
		if len(d.factCols) != 1 {
			return nil
		}
		if len(ranges[i]) == 0 {
			continue
		}
		in := keysFilter(d.factCols[0], ranges[i])
		if in == nil {
			return nil
		}
		ors = append(ors, expr.And(append([]expr.Predicate{in}, fr.timeBounds(d, ranges[i])...)...))
	}
	switch len(ors) {
	case 0:
		return nil
	case 1:
		return ors[0]
	}
	return expr.Or(ors...)
}

// timeBounds are the bounds of the changed ranges on the fact table's at column of
// lookup d, when it is a timestamp: at >= the earliest from, at < the latest to (none
// where a range is open).
func (fr *factRun) timeBounds(d *factDim, ranges map[string][]dimInterval) []expr.Predicate {
	at := -1
	for j, fld := range fr.out.Fields() {
		if strings.EqualFold(fld.Name, d.lookup.At) {
			at = j
		}
	}
	if at < 0 || fr.out.Field(at).Type.ID() != arrow.TIMESTAMP {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, rs := range ranges {
		for _, r := range rs {
			lo, hi = min(lo, r.from), max(hi, r.to)
		}
	}
	name := fr.out.Field(at).Name
	var ps []expr.Predicate
	if lo != math.MinInt64 {
		ps = append(ps, expr.Ge(name, time.UnixMicro(lo).UTC()))
	}
	if hi != math.MaxInt64 {
		ps = append(ps, expr.Lt(name, time.UnixMicro(hi).UTC()))
	}
	return ps
}

// keysFilter is column IN the one-column business keys of keys (nil, no filter, when
// there are none or a key is not a string or an integer).
func keysFilter(column string, keys map[string][]dimInterval) expr.Predicate {
	if len(keys) == 0 {
		return nil
	}
	vals := make([]any, 0, len(keys))
	for k := range keys {
		v, ok := decodeKeyValue(k)
		if !ok {
			return nil
		}
		vals = append(vals, v)
	}
	return expr.In(column, vals...)
}

// decodeKeyValue decodes a one-column key as keyed.AppendKey encodes strings and integers.
func decodeKeyValue(k string) (any, bool) {
	if len(k) == 0 {
		return nil, false
	}
	switch k[0] {
	case 1:
		b := []byte(k[1:])
		n, w := uvarint(b)
		if w <= 0 || int(n) != len(b)-w {
			return nil, false
		}
		return string(b[w:]), true
	case 2:
		if len(k) != 9 {
			return nil, false
		}
		var v uint64
		for i := 8; i >= 1; i-- {
			v = v<<8 | uint64(k[i])
		}
		return int64(v), true
	}
	return nil, false
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// differs is the UPDATE condition: the source row differs from the fact (null-safe).
func (fr *factRun) differs(rows arrow.RecordBatch) ([]bool, error) {
	names := nameIndex(rows.Schema())
	out := make([]bool, rows.NumRows())
	for j := range fr.keyOf {
		name := strings.ToLower(fr.out.Field(j).Name)
		si, ok1 := names["source."+name]
		ti, ok2 := names["target."+name]
		if !ok1 || !ok2 {
			for r := range out {
				out[r] = true
			}
			return out, nil
		}
		markDiffering(rows.Column(si), rows.Column(ti), out)
	}
	return out, nil
}

// markDiffering sets out[r] where row r of sc and tc differ (null-safe): values of the
// common types compared as they are, others by their text.
func markDiffering(sc, tc arrow.Array, out []bool) {
	if arrow.TypeEqual(sc.DataType(), tc.DataType()) {
		switch s := sc.(type) {
		case *array.String:
			markDifferingValues(s, tc.(*array.String), out)
			return
		case *array.Int64:
			markDifferingValues(s, tc.(*array.Int64), out)
			return
		case *array.Int32:
			markDifferingValues(s, tc.(*array.Int32), out)
			return
		case *array.Timestamp:
			markDifferingValues(s, tc.(*array.Timestamp), out)
			return
		case *array.Date32:
			markDifferingValues(s, tc.(*array.Date32), out)
			return
		case *array.Boolean:
			markDifferingValues(s, tc.(*array.Boolean), out)
			return
		case *array.Decimal128:
			markDifferingValues(s, tc.(*array.Decimal128), out)
			return
		}
	}
	for r := range out {
		if out[r] {
			continue
		}
		sn, tn := sc.IsNull(r), tc.IsNull(r)
		out[r] = sn != tn || !sn && sc.ValueStr(r) != tc.ValueStr(r)
	}
}

// markDifferingValues is markDiffering for arrays whose values compare with ==.
func markDifferingValues[T comparable, A interface {
	arrow.Array
	Value(int) T
}](sc, tc A, out []bool) {
	for r := range out {
		if out[r] {
			continue
		}
		sn, tn := sc.IsNull(r), tc.IsNull(r)
		out[r] = sn != tn || !sn && sc.Value(r) != tc.Value(r)
	}
}

// nameIndex maps a schema's lower-cased column names to their indexes.
func nameIndex(s *arrow.Schema) map[string]int {
	m := make(map[string]int, s.NumFields())
	for i, f := range s.Fields() {
		m[strings.ToLower(f.Name)] = i
	}
	return m
}
