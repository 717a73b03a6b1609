package testenv

import (
	"runtime/metrics"
	"testing"
)

// MaxAlloc runs f and fails t when the heap allocations made meanwhile exceed limit
// bytes: a fuzz target's check that a small input cannot make a parser allocate
// without bound (a length field that claims gigabytes). Fuzz workers run one input at
// a time, so what is counted is f's.
func MaxAlloc(t testing.TB, limit uint64, f func()) {
	t.Helper()
	before := heapAllocs()
	f()
	if n := heapAllocs() - before; n > limit {
		t.Fatalf("allocated %d MiB for one input, want at most %d MiB", n>>20, limit>>20)
	}
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
