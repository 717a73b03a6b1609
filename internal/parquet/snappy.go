package parquet

import (
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
)

// fastSnappy is arrow-go's snappy codec with a faster block encoder: arrow-go encodes
// snappy pages with s2.EncodeSnappyBetter, which spends about a quarter of a write's CPU
// for a few percent of size. s2.EncodeSnappy writes the same standard snappy block format
// (every snappy reader decodes it: Spark, delta-rs, DuckDB); decoding and streams are the
// original codec's.
type fastSnappy struct {
	orig compress.Codec
}

func (fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

func (c fastSnappy) CompressBound(n int64) int64 { return c.orig.CompressBound(n) }

func (c fastSnappy) Decode(dst, src []byte) []byte { return c.orig.Decode(dst, src) }

func (c fastSnappy) DecodeWithError(dst, src []byte) ([]byte, error) {
	return compress.Decode(c.orig, dst, src)
}

func (c fastSnappy) NewReader(r io.Reader) io.ReadCloser {
	return c.orig.(compress.StreamingCodec).NewReader(r)
}

func (c fastSnappy) NewWriter(w io.Writer) io.WriteCloser {
	return c.orig.(compress.StreamingCodec).NewWriter(w)
}

func (c fastSnappy) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return c.orig.(compress.StreamingCodec).NewWriterLevel(w, level)
}

var useFastSnappy sync.Once

// RegisterFastSnappy swaps in fastSnappy for the process, once: call it before the
// first write.
func RegisterFastSnappy() {
	useFastSnappy.Do(func() {
		orig, err := compress.GetCodec(compress.Codecs.Snappy)
		if err != nil {
			return
		}
		if _, ok := orig.(compress.StreamingCodec); !ok {
			return
		}
		compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{orig: orig})
	})
}
