package delta

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// A file's bytes kept in blocks read back as written, whatever the sizes of the writes
// (small ones filling a block, one larger than a block).
func TestSinkBlocksReadBackAsWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var want bytes.Buffer
	var b blocks
	for _, n := range []int{1, 7, minBlock - 8, 100, 3 * maxBlock / 2, 5, minBlock, 12345} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		want.Write(p)
		if k, err := b.Write(p); k != n || err != nil {
			t.Fatalf("Write of %d bytes: %d, %v", n, k, err)
		}
	}
	if b.Len() != want.Len() {
		t.Fatalf("Len %d, want %d", b.Len(), want.Len())
	}
	got, err := io.ReadAll(b.reader())
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read back %d bytes (%v), differ from the %d written", len(got), err, want.Len())
	}
	var out bytes.Buffer
	if n, err := b.WriteTo(&out); err != nil || n != int64(want.Len()) || !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatalf("WriteTo: %d bytes, %v", n, err)
	}
}
