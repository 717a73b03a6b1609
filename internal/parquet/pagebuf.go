package parquet

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// PageBuffers allocates the buffers a Parquet file reader keeps for itself: the
// compressed and decompressed bytes of its pages (parquet.NewReaderProperties). A reader
// frees them when its column chunk is done, and the next chunk's reader, of this file or
// another, gets them again instead of new zeroed memory: a scan of many files then spends
// its time decoding, not clearing pages it is about to overwrite.
//
// A buffer it hands out is not zeroed. It suits only memory whose every byte is written
// before it is read and that nothing holds after Free: never the arrays a reader returns.
var PageBuffers memory.Allocator = &pagePool{}

// Buffers from minPooled to maxPooled bytes are kept, in power-of-two classes; smaller
// ones cost little to clear and larger ones are rare.
const (
	minPooledShift = 12 // 4 KiB
	maxPooledShift = 26 // 64 MiB
)

type pagePool struct {
	classes [maxPooledShift - minPooledShift + 1]sync.Pool // of *[]byte, cap 1<<shift
	poison  atomic.Bool                                    // PoisonPageBuffers
}

// PoisonPageBuffers makes PageBuffers fill every buffer it takes back with 0xA5 bytes,
// so that memory still in use after Free shows as garbage at once; the returned func
// turns it off. For tests.
func PoisonPageBuffers() (off func()) {
	p := PageBuffers.(*pagePool)
	p.poison.Store(true)
	return func() { p.poison.Store(false) }
}

// class returns the class index of a buffer of size bytes, or -1 when it is not pooled.
func class(size int) int {
	if size <= 0 || size > 1<<maxPooledShift {
		return -1
	}
	shift := bits.Len(uint(size - 1))
	if shift < minPooledShift {
		return -1
	}
	return shift - minPooledShift
}

func (p *pagePool) Allocate(size int) []byte {
	c := class(size)
	if c < 0 {
		return make([]byte, size)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:size]
	}
	return make([]byte, size, 1<<(c+minPooledShift))
}

func (p *pagePool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

func (p *pagePool) Free(b []byte) {
	c := class(cap(b))
	if c < 0 || cap(b) != 1<<(c+minPooledShift) {
		return // not one of ours: the garbage collector takes it
	}
	b = b[:cap(b)]
	if p.poison.Load() {
		for i := range b {
			b[i] = 0xa5
		}
	}
	p.classes[c].Put(&b)
}
