package parquet

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// dictChunk dictionary-encodes one string or binary column chunk of the open row group
// itself, instead of arrow-go's encoder hashing every value (which costs it an
// allocation per value): each batch's values become indices into a dictionary kept in
// first-seen order, and the row group's close hands the dictionary and each batch's
// indices to the column writer, batch by batch, as a dictionary array. The column chunk
// is the one arrow-go writes from the plain values (same dictionary order, indices,
// pages and statistics). A dictionary that reaches the dictionary page size limit is
// where arrow-go falls back to plain pages: then the batches so far are replayed as plain
// values, so that it falls back at the same point, and the chunk continues the ordinary
// way.
type dictChunk struct {
	ids     map[string]int32 // value → index
	data    []byte           // the dictionary's values, concatenated
	offs    []int32          // their offsets (len = entries + 1)
	size    int64            // encoded dictionary size (4 + len per entry), as arrow-go counts it
	pending []arrow.Array    // per batch: int32 indices with the batch's validity
}

// binaryValues is what *array.String and *array.Binary share.
type binaryValues interface {
	arrow.Array
	ValueOffsets() []int32
	ValueBytes() []byte
}

// add maps col's values to indices (nulls to index 0, kept null) and queues them. It
// reports false, queueing nothing, once the dictionary reaches limit bytes.
func (d *dictChunk) add(col binaryValues, limit int64) bool {
	if d.ids == nil {
		d.ids = make(map[string]int32)
		d.offs = []int32{0}
	}
	n, off := col.Len(), col.Data().Offset()
	if n == 0 {
		return d.size < limit
	}
	offs, data := col.ValueOffsets(), col.ValueBytes() // data starts at the first value
	base := offs[0]
	vals := make([]int32, off+n)
	idx := vals[off:]
	nulls := col.NullN()
	lookup := func(v []byte) int32 {
		id, ok := d.ids[string(v)]
		if !ok {
			id = int32(len(d.offs) - 1)
			d.ids[string(v)] = id
			d.data = append(d.data, v...)
			d.offs = append(d.offs, int32(len(d.data)))
			d.size += int64(len(v)) + 4
		}
		return id
	}
	if w := offs[1] - base; nulls == 0 && ConstantOffsets(offs) && bytes.Equal(data[w:], data[:len(data)-int(w)]) {
		id := lookup(data[:w]) // every value is the first (the bytes repeat with its length)
		for i := range idx {
			idx[i] = id
		}
	} else {
		var prev []byte
		prevID := int32(-1)
		for i := range n {
			if nulls > 0 && col.IsNull(i) {
				continue
			}
			v := data[offs[i]-base : offs[i+1]-base]
			if prevID < 0 || !bytes.Equal(v, prev) {
				prev, prevID = v, lookup(v)
			}
			idx[i] = prevID
		}
	}
	if d.size >= limit {
		return false
	}
	var validity *memory.Buffer
	if nulls > 0 {
		validity = col.Data().Buffers()[0]
	}
	ad := array.NewData(arrow.PrimitiveTypes.Int32, n,
		[]*memory.Buffer{validity, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(vals))}, nil, nulls, off)
	d.pending = append(d.pending, array.NewInt32Data(ad))
	ad.Release()
	return true
}

// dictionary returns the dictionary as an array of type dt.
func (d *dictChunk) dictionary(dt arrow.DataType) arrow.Array {
	data := array.NewData(dt, len(d.offs)-1, []*memory.Buffer{nil,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.offs)), memory.NewBufferBytes(d.data)}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// flush writes the queued batches to cw: the dictionary, then each batch's indices in
// steps of batchSize values, as arrow-go writes plain values into a dictionary encoder
// (its raw size, by which it cuts pages, and each step's page statistics are counted
// the same way); or, with plain, the batches' values the ordinary way.
func (d *dictChunk) flush(fc *flatColumn, cw file.ColumnChunkWriter, dt arrow.DataType, mem memory.Allocator, batchSize int64, plain bool) error {
	if len(d.pending) == 0 {
		d.reset()
		return nil
	}
	dict := d.dictionary(dt)
	defer dict.Release()
	bw, ok := cw.(*file.ByteArrayColumnChunkWriter)
	enc, encOK := cw.CurrentEncoder().(dictionaryEncoder)
	stats, statsOK := cw.PageStatistics().(*metadata.ByteArrayStatistics)
	if plain || dict.Len() == 0 || !ok || !encOK || (cw.PageStatistics() != nil && !statsOK) || enc.NumEntries() != 0 {
		for _, idx := range d.pending {
			arr, err := materialize(mem, dict, idx)
			if err != nil {
				return err
			}
			var defs []int16
			if fc.nullable {
				defs = fc.defLevels(arr)
			}
			err = pqarrow.WriteArrowToColumn(fc.ctx, cw, arr, defs, nil, fc.nullable)
			arr.Release()
			if err != nil {
				return err
			}
		}
		d.reset()
		return nil
	}
	if err := enc.PutDictionary(dict); err != nil {
		return err
	}
	rank := d.ranks()
	var mm []byte // a step's min and max value
	for _, idx := range d.pending {
		ix := idx.(*array.Int32)
		vals := ix.Int32Values()
		n := int64(ix.Len())
		var defs []int16
		if fc.nullable {
			defs = fc.defLevels(ix)
		}
		for lo := int64(0); lo < n; lo += batchSize {
			hi := min(lo+batchSize, n)
			var raw, valid int64
			minID, maxID := int32(-1), int32(-1)
			for i := lo; i < hi; i++ {
				if ix.IsNull(int(i)) {
					continue
				}
				id := vals[i]
				valid++
				raw += int64(d.offs[id+1]-d.offs[id]) + 4
				if minID < 0 || rank[id] < rank[minID] {
					minID = id
				}
				if maxID < 0 || rank[id] > rank[maxID] {
					maxID = id
				}
			}
			if stats != nil {
				nulls := (hi - lo) - valid
				if valid == 0 {
					stats.IncNulls(nulls)
				} else {
					mm = append(append(mm[:0], d.value(minID)...), d.value(maxID)...)
					lmin := int32(len(d.value(minID)))
					stats.UpdateFromArrowOffsets(mm, []int32{0, lmin, int32(len(mm))}, nulls)
					stats.IncNumValues(valid - 2)
				}
			}
			enc.AddRawSize(raw)
			step := array.NewSlice(ix, lo, hi)
			var stepDefs []int16
			if defs != nil {
				stepDefs = defs[lo:hi]
			}
			err := bw.WriteDictIndices(step, stepDefs, nil)
			step.Release()
			if err != nil {
				return err
			}
		}
	}
	d.reset()
	return nil
}

// dictionaryEncoder is what flush needs of arrow-go's dictionary encoder.
type dictionaryEncoder interface {
	PutDictionary(arrow.Array) error
	NumEntries() int
	AddRawSize(int64)
}

// value returns dictionary entry id.
func (d *dictChunk) value(id int32) []byte { return d.data[d.offs[id]:d.offs[id+1]] }

// ranks returns each dictionary entry's position in byte order.
func (d *dictChunk) ranks() []int32 {
	order := make([]int32, len(d.offs)-1)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(d.value(a), d.value(b)) })
	rank := make([]int32, len(order))
	for r, id := range order {
		rank[id] = int32(r)
	}
	return rank
}

// materialize returns the values that idx selects from dict (nulls where idx is null).
func materialize(mem memory.Allocator, dict, idx arrow.Array) (arrow.Array, error) {
	b := array.NewBinaryBuilder(mem, dict.DataType().(arrow.BinaryDataType))
	defer b.Release()
	d := dict.(binaryValues)
	offs, data := d.ValueOffsets(), d.ValueBytes()
	ix := idx.(*array.Int32)
	for i := range ix.Len() {
		if ix.IsNull(i) {
			b.AppendNull()
			continue
		}
		k := ix.Value(i)
		if int(k) >= dict.Len() {
			return nil, fmt.Errorf("dictionary index %d out of %d", k, dict.Len())
		}
		b.Append(data[offs[k]:offs[k+1]])
	}
	built := b.NewArray()
	defer built.Release()
	return array.MakeFromData(built.Data()), nil
}

// reset drops the queued batches and the dictionary.
func (d *dictChunk) reset() {
	for _, idx := range d.pending {
		idx.Release()
	}
	*d = dictChunk{}
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
