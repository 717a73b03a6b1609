package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/google/uuid"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Deletion vectors (PROTOCOL.md, Deletion Vectors): a file's deleted rows are a set of
// row indexes in the file, stored as a 64-bit roaring bitmap ("RoaringBitmapArray",
// portable serialization) either inline in the log (storage type "i", Z85 text) or in a
// deletion vector file next to the data (types "u", a UUID-named file under the table
// root, and "p", an absolute path).
//
// A DV file is a version byte (1), then for each vector a 4-byte big-endian length, the
// vector (4-byte little-endian magic, then the bitmap) and a 4-byte big-endian CRC-32 of
// the vector. A descriptor's offset points at the length; sizeInBytes is the vector's
// length, magic included.

// dvMagic marks the portable RoaringBitmapArray serialization.
const dvMagic = 1681511377

// dvFilePrefix and dvFileSuffix name the deletion vector files this package writes.
const (
	dvFilePrefix = "deletion_vector_"
	dvFileSuffix = ".bin"
)

// z85Alphabet is ZeroMQ's Z85 alphabet (RFC 32), which the protocol uses for inline
// vectors and UUIDs in paths.
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

var z85Values = func() [256]int8 {
	var v [256]int8
	for i := range v {
		v[i] = -1
	}
	for i := 0; i < len(z85Alphabet); i++ {
		v[z85Alphabet[i]] = int8(i)
	}
	return v
}()

// z85Encode encodes b, whose length is a multiple of 4, as Z85 text.
func z85Encode(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) / 4 * 5)
	var chunk [5]byte
	for i := 0; i+4 <= len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		for j := 4; j >= 0; j-- {
			chunk[j] = z85Alphabet[v%85]
			v /= 85
		}
		sb.Write(chunk[:])
	}
	return sb.String()
}

// z85Decode decodes Z85 text, whose length must be a multiple of 5. The last group may
// be padded as the Rust z85 crate (delta-kernel-rs) writes inline vectors: k leading '#'
// (which no full group starts with, as 85^5 > 2^32) say it holds 4-k bytes, written as
// a big-endian number in its other 5-k characters.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("z85: length %d is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		g := s[i : i+5]
		pad := 0
		if i+5 == len(s) {
			for pad < 4 && g[pad] == '#' {
				pad++
			}
			if pad == 4 {
				return nil, fmt.Errorf("z85: last group %q is all padding", g)
			}
		}
		var v uint64
		for j := pad; j < 5; j++ {
			d := z85Values[g[j]]
			if d < 0 {
				return nil, fmt.Errorf("z85: invalid character %q at %d", g[j], i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF>>(8*pad) {
			return nil, fmt.Errorf("z85: group %q at %d overflows %d bytes", g, i, 4-pad)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(v))
		out = append(out, b[pad:]...)
	}
	return out, nil
}

// dvFileKey returns the key, relative to the table root, of the file of a "u" or "p"
// vector. tableURI resolves "p" paths (which must lie under the table).
func dvFileKey(dv *DeletionVector, tableURI string) (string, error) {
	switch dv.StorageType {
	case "u":
		p := dv.PathOrInlineDv
		if len(p) < 20 {
			return "", fmt.Errorf("deletion vector path %q: want a prefix and a 20-character Z85 UUID", p)
		}
		raw, err := z85Decode(p[len(p)-20:])
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", p, err)
		}
		id, err := uuid.FromBytes(raw)
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", p, err)
		}
		name := dvFilePrefix + id.String() + dvFileSuffix
		if prefix := p[:len(p)-20]; prefix != "" {
			return prefix + "/" + name, nil
		}
		return name, nil
	case "p":
		u, err := url.Parse(dv.PathOrInlineDv)
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", dv.PathOrInlineDv, err)
		}
		if tableURI != "" {
			base, err := url.Parse(strings.TrimSuffix(tableURI, "/"))
			if err == nil && base.Scheme == u.Scheme && base.Host == u.Host && strings.HasPrefix(u.Path, base.Path+"/") {
				return strings.TrimPrefix(u.Path, base.Path+"/"), nil
			}
		}
		return "", fmt.Errorf("deletion vector path %s is outside the table", dv.PathOrInlineDv)
	}
	return "", fmt.Errorf("deletion vector storage type %q has no file", dv.StorageType)
}

// loadDeletionVector reads the set of deleted row indexes a descriptor names, checking
// its length, magic, checksum and cardinality.
func loadDeletionVector(ctx context.Context, store objectstore.Store, root, tableURI string, dv *DeletionVector) (*roaring64.Bitmap, error) {
	var data []byte
	switch dv.StorageType {
	case "i":
		raw, err := z85Decode(dv.PathOrInlineDv)
		if err != nil {
			return nil, fmt.Errorf("inline deletion vector: %w", err)
		}
		if int64(len(raw)) < int64(dv.SizeInBytes) || dv.SizeInBytes < 4 {
			return nil, fmt.Errorf("inline deletion vector: %d bytes, sizeInBytes %d", len(raw), dv.SizeInBytes)
		}
		data = raw[:dv.SizeInBytes]
	case "u", "p":
		rel, err := dvFileKey(dv, tableURI)
		if err != nil {
			return nil, err
		}
		key := joinKey(root, rel)
		off := int64(0)
		if dv.Offset != nil {
			off = int64(*dv.Offset)
		}
		if off < 1 || dv.SizeInBytes < 4 {
			return nil, fmt.Errorf("deletion vector %s: bad offset %d or size %d", rel, off, dv.SizeInBytes)
		}
		buf, err := readRange(ctx, store, key, off, int64(dv.SizeInBytes)+8)
		if err != nil {
			return nil, fmt.Errorf("deletion vector %s: %w", rel, err)
		}
		if len(buf) != int(dv.SizeInBytes)+8 {
			return nil, fmt.Errorf("deletion vector %s: file ends %d bytes into a %d-byte vector at offset %d", rel, len(buf), dv.SizeInBytes, off)
		}
		if n := binary.BigEndian.Uint32(buf); n != uint32(dv.SizeInBytes) {
			return nil, fmt.Errorf("deletion vector %s: stored length %d, descriptor says %d", rel, n, dv.SizeInBytes)
		}
		data = buf[4 : 4+dv.SizeInBytes]
		if got, want := crc32.ChecksumIEEE(data), binary.BigEndian.Uint32(buf[4+dv.SizeInBytes:]); got != want {
			return nil, fmt.Errorf("deletion vector %s: checksum %08x, stored %08x", rel, got, want)
		}
	default:
		return nil, fmt.Errorf("deletion vector storage type %q is not u, i or p", dv.StorageType)
	}
	bm, err := decodeDVBitmap(data)
	if err != nil {
		return nil, err
	}
	if got := bm.GetCardinality(); int64(got) != dv.Cardinality {
		return nil, fmt.Errorf("deletion vector: %d rows deleted, descriptor says %d", got, dv.Cardinality)
	}
	return bm, nil
}

// decodeDVBitmap parses a vector: the magic, then a portable 64-bit roaring bitmap. A
// vector the roaring library cannot parse, or whose containers are not well formed, is
// an error, even if the library panics on it.
func decodeDVBitmap(data []byte) (bm *roaring64.Bitmap, err error) {
	defer func() {
		if r := recover(); r != nil {
			bm, err = nil, fmt.Errorf("deletion vector: corrupt bitmap (%v)", r)
		}
	}()
	if len(data) < 12 {
		return nil, fmt.Errorf("deletion vector: %d bytes is too short", len(data))
	}
	if m := binary.LittleEndian.Uint32(data); m != dvMagic {
		return nil, fmt.Errorf("deletion vector: magic %d, want %d (portable RoaringBitmapArray)", m, dvMagic)
	}
	body := data[4:]
	// Each bucket takes at least a key and a bitmap header: refuse counts the bytes
	// cannot hold before the library allocates for them.
	if n := binary.LittleEndian.Uint64(body); n > uint64(len(body)-8)/12 {
		return nil, fmt.Errorf("deletion vector: %d buckets in %d bytes", n, len(body))
	}
	bm = roaring64.New()
	if _, err := bm.ReadFrom(bytes.NewReader(body)); err != nil {
		return nil, fmt.Errorf("deletion vector: %w", err)
	}
	// ReadFrom takes containers as stored: an unsorted or overlapping one would make
	// membership and iteration disagree about which rows are deleted.
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("deletion vector: corrupt bitmap: %w", err)
	}
	return bm, nil
}

// readRange reads length bytes of key from offset (fewer at the end of the object).
func readRange(ctx context.Context, store objectstore.Store, key string, offset, length int64) ([]byte, error) {
	rg, ranged := store.(objectstore.RangeGetter)
	var rc io.ReadCloser
	var err error
	if ranged {
		rc, err = rg.GetRange(ctx, key, offset, length)
	} else {
		rc, err = store.Get(ctx, key)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if !ranged {
		if _, err := io.CopyN(io.Discard, rc, offset); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(rc, length))
}

// encodeDVFile returns a DV file holding one vector for bm, and the vector's length
// (sizeInBytes; the vector starts at offset 1).
func encodeDVFile(bm *roaring64.Bitmap) ([]byte, int32, error) {
	bm.RunOptimize()
	var vec bytes.Buffer
	vec.Write(binary.LittleEndian.AppendUint32(nil, dvMagic))
	if _, err := bm.WriteTo(&vec); err != nil {
		return nil, 0, err
	}
	out := make([]byte, 0, vec.Len()+9)
	out = append(out, 1)
	out = binary.BigEndian.AppendUint32(out, uint32(vec.Len()))
	out = append(out, vec.Bytes()...)
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(vec.Bytes()))
	return out, int32(vec.Len()), nil
}

// writeDeletionVector stores bm as a new DV file under the table root and returns its
// descriptor. The file is new (UUID-named), so a failed commit leaves only an orphan
// for VACUUM.
func writeDeletionVector(ctx context.Context, store objectstore.Store, root string, bm *roaring64.Bitmap) (*DeletionVector, error) {
	file, size, err := encodeDVFile(bm)
	if err != nil {
		return nil, err
	}
	id := uuid.New()
	key := joinKey(root, dvFilePrefix+id.String()+dvFileSuffix)
	if err := store.Put(ctx, key, bytes.NewReader(file), int64(len(file))); err != nil {
		return nil, fmt.Errorf("write deletion vector: %w", err)
	}
	off := int32(1)
	return &DeletionVector{StorageType: "u", PathOrInlineDv: z85Encode(id[:]), Offset: &off,
		SizeInBytes: size, Cardinality: int64(bm.GetCardinality())}, nil
}

// keptRowsOf returns the indexes in [first, first+n) of a file's rows that bm does not
// delete, relative to first; all is true when none is deleted. With inverse it returns
// the rows bm holds instead (all: every row is in bm).
func keptRowsOf(bm *roaring64.Bitmap, first, n int64, inverse bool) (rows []int32, all bool) {
	it := bm.Iterator()
	it.AdvanceIfNeeded(uint64(first))
	end := uint64(first + n)
	if !inverse && (!it.HasNext() || it.PeekNext() >= end) {
		return nil, true
	}
	next := end // the next row bm holds in the range (end: none)
	if it.HasNext() {
		next = min(it.Next(), end)
	}
	rows = make([]int32, 0, n)
	for r := uint64(first); r < end; r++ {
		in := r == next
		if in {
			next = end
			if it.HasNext() {
				next = min(it.Next(), end)
			}
		}
		if in == inverse {
			rows = append(rows, int32(r-uint64(first)))
		}
	}
	return rows, len(rows) == int(n)
}

// physicalRows maps ascending logical row indexes (counting only the rows old keeps,
// as scans number them) to row indexes in the file. old may be nil.
func physicalRows(old *roaring64.Bitmap, logical []int64) []uint64 {
	out := make([]uint64, len(logical))
	if old == nil || old.IsEmpty() {
		for i, l := range logical {
			out[i] = uint64(l)
		}
		return out
	}
	del := old.ToArray() // ascending
	j, skipped := 0, uint64(0)
	for i, l := range logical {
		p := uint64(l) + skipped
		for j < len(del) && del[j] <= p {
			j++
			skipped++
			p++
		}
		out[i] = p
	}
	return out
}
