package delta

import (
	"bytes"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// A vector file round-trips, and Z85 text does too (UUIDs in "u" paths).
func TestDeletionVectorEncoding(t *testing.T) {
	bm := roaring64.BitmapOf(0, 3, 70000, 1<<33)
	file, size, err := encodeDVFile(bm)
	if err != nil {
		t.Fatal(err)
	}
	if file[0] != 1 || int(size) != len(file)-9 {
		t.Fatalf("file of %d bytes, version %d, vector size %d", len(file), file[0], size)
	}
	got, err := decodeDVBitmap(file[5 : 5+size])
	if err != nil || !got.Equals(bm) {
		t.Fatalf("decoded %v (%v), want %v", got, err, bm)
	}
	raw := []byte{0x86, 0x4f, 0xd2, 0x6f, 0xb5, 0x59, 0xf7, 0x5b}
	if s := z85Encode(raw); s != "HelloWorld" {
		t.Errorf("z85 = %q, want HelloWorld (RFC 32's example)", s)
	}
	if back, err := z85Decode("HelloWorld"); err != nil || !bytes.Equal(back, raw) {
		t.Errorf("z85 decode = %x, %v", back, err)
	}
	// delta-kernel-rs pads inline vectors: "##093" is the two bytes 03 00.
	if back, err := z85Decode("00000##093"); err != nil || !bytes.Equal(back, []byte{0, 0, 0, 0, 3, 0}) {
		t.Errorf("padded z85 decode = %x, %v", back, err)
	}
}

// Corrupt vectors are errors, never panics.
func TestCorruptDeletionVectorBytes(t *testing.T) {
	good, size, err := encodeDVFile(roaring64.BitmapOf(1, 2, 3, 100000))
	if err != nil {
		t.Fatal(err)
	}
	vec := good[5 : 5+size]
	for cut := 0; cut < len(vec); cut++ {
		if _, err := decodeDVBitmap(vec[:cut]); err == nil {
			t.Errorf("a vector cut to %d of %d bytes decoded", cut, len(vec))
		}
	}
	for i := 4; i < len(vec); i++ {
		bad := bytes.Clone(vec)
		bad[i] ^= 0xff
		decodeDVBitmap(bad) // may decode to another set (the CRC catches that in files); must not panic
	}
	for _, s := range []string{"abc", "#####", "~~~~~"} {
		if _, err := z85Decode(s); err == nil || !strings.Contains(err.Error(), "z85") {
			t.Errorf("z85Decode(%q) error = %v", s, err)
		}
	}
}
