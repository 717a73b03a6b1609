package parquet

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPageBuffersReuseByClass(t *testing.T) {
	p := &pagePool{}
	for _, c := range []struct{ size, class int }{
		{0, -1}, {1, -1}, {4096, 0}, {4097, 1}, {8192, 1}, {1 << 26, 14}, {1<<26 + 1, -1},
	} {
		if got := class(c.size); got != c.class {
			t.Errorf("class(%d) = %d, want %d", c.size, got, c.class)
		}
	}
	b := p.Allocate(5000)
	if len(b) != 5000 || cap(b) != 8192 {
		t.Fatalf("Allocate(5000): len %d cap %d, want 5000 and 8192", len(b), cap(b))
	}
	b[0] = 7
	p.Free(b)
	// Any size of a class gets the class's capacity, a freed buffer or a new one
	// (TestPoisonPageBuffers shows a freed one coming back).
	if again := p.Allocate(6000); cap(again) != 8192 || len(again) != 6000 {
		t.Fatalf("Allocate(6000) after Free: len %d cap %d", len(again), cap(again))
	}
	// Reallocate within the capacity keeps the bytes; beyond it, copies them.
	r := p.Allocate(4096)
	r[4095] = 9
	r = p.Reallocate(4096*3, r)
	if len(r) != 12288 || r[4095] != 9 {
		t.Fatalf("Reallocate: len %d, byte %d", len(r), r[4095])
	}
	// Small and huge buffers are the garbage collector's: Free ignores them.
	p.Free(make([]byte, 100))
	p.Free(make([]byte, 5000)) // cap 5000 is no class size
	var _ memory.Allocator = PageBuffers
}

func TestPoisonPageBuffers(t *testing.T) {
	off := PoisonPageBuffers()
	defer off()
	p := PageBuffers.(*pagePool)
	for range 10 { // sync.Pool may drop a buffer (under -race, one in four): try again
		b := p.Allocate(5000)
		for i := range b {
			b[i] = 1
		}
		p.Free(b)
		if again := p.Allocate(5000); cap(again) == cap(b) && &again[0] == &b[0] {
			if again[0] != 0xa5 || again[4999] != 0xa5 {
				t.Fatalf("a freed buffer came back with %x…%x, want 0xa5 throughout", again[0], again[4999])
			}
			return
		}
	}
	t.Fatal("no freed buffer came back in 10 tries") // sync.Pool drops some, never all
}
