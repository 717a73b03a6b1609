package keyed

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A string Value returns is the stage's own: the dimension scan keeps the rows of a
// few keys per record, and a string pointing into the record's data buffer would keep
// every record's buffer (the whole dimension) alive, or change when a pooled allocator
// reuses it.
func TestValueStringOwnsItsBytes(t *testing.T) {
	vals := []string{"Seattle", "Portland"}
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString} {
		t.Run(dt.String(), func(t *testing.T) {
			b := array.NewBuilder(memory.DefaultAllocator, dt)
			for _, v := range vals {
				b.AppendValueFromString(v)
			}
			arr := b.NewArray()
			b.Release()
			defer arr.Release()
			got, err := Value(arr, 1)
			if err != nil {
				t.Fatal(err)
			}
			data := arr.Data().Buffers()[2].Bytes()
			for i := range data { // the buffer is reused for another record
				data[i] = 'x'
			}
			if got != "Portland" {
				t.Errorf("value kept while its buffer was overwritten: got %q, want %q", got, "Portland")
			}
		})
	}
}
