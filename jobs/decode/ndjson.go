package decode

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

func newNDJSONSource(r io.Reader, file string, opts *Options, schema *arrow.Schema) (source, error) {
	return nil, fmt.Errorf("decode %s: ndjson: not yet", file)
}

func newParquetSource(ctx context.Context, r io.Reader, file string, opts *Options, schema *arrow.Schema) (source, error) {
	return nil, fmt.Errorf("decode %s: parquet: not yet", file)
}
