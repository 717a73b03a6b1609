// Package parquet is the Parquet file codec below Arrow that delta and jobs/decode share,
// where arrow-go's pqarrow is slower or wrong for Delta tables:
//
//   - Reading: OpenColumns reads a file's top-level fields batch by batch, each field on
//     its own goroutine. Flat string and binary columns in PLAIN or dictionary pages are
//     decoded straight into Arrow buffers (byteArrayReader, strings.go); flat INT96
//     timestamps, Spark's default, are read as microseconds (Int96Reader, int96.go), so a
//     9999-12-31 end date reads; everything else goes through pqarrow. A reader's
//     page buffers come from PageBuffers (pagebuf.go), which hands a freed one to the
//     next column chunk instead of clearing new memory.
//   - Writing: FlatWriter writes a schema without nested columns. Columns of the common
//     types (strings, binary, longs, ints, dates, timestamps, decimals stored as longs)
//     are encoded by a chunkWriter (chunk.go, chunk_dict.go, rle.go) straight from the
//     Arrow buffers, with or without a dictionary (a value's index found in an
//     open-addressing table of the dictionary's own); the others through arrow-go's
//     column writers. The writer keeps each bytes column's least and greatest values,
//     the ones its statistics hold, for the caller's own file statistics (BytesMinMax). A batch's columns are encoded concurrently when cores are idle
//     (write_parallel.go); arrow-go's page writer and metadata builders write the page
//     headers, chunk metadata and footer. RegisterFastSnappy swaps in a faster Snappy
//     block encoder.
//   - Splicing: ReadFooter decodes a footer with a Thrift compact codec of its own
//     (thrift.go) that keeps every field, known or not; WriteSpliced writes a file whose
//     column chunks are an old file's, byte for byte, but for the ones replaced.
//
// Invariants:
//   - What OpenColumns returns equals what pqarrow returns for the same file, row groups
//     and batch size, except INT96 columns (microseconds where pqarrow has nanoseconds).
//     A corrupt page, or a panic in arrow-go's reader on one, is an error naming the
//     file (the caller's what) and the column, never a panic or a short batch.
//   - A FlatWriter's file is the one pqarrow's FileWriter writes from the same batches
//     under the same properties, byte for byte, whatever order the columns are encoded
//     in; two exceptions, both arrow-go's own nondeterminism: where a dictionary fell back
//     to plain pages a chunk's page encoding counts are listed in map order, and arrow-go
//     leaves whatever its pooled buffers held in the padding bits of a boolean page's
//     last byte (TestChunkWritersMatchPqarrow, TestOwnDictionaryMatchesPqarrow).
//   - PageBuffers' memory is never in an array a reader returns: arrays are built from
//     the caller's allocator, and a page buffer is written before it is read.
//   - Decoding a footer and encoding it again gives the same bytes. A splice copies a
//     chunk's byte range only when CheckChunks found every chunk inside the file and the
//     chunks of each row group contiguous, so a range is exactly one chunk's pages; the
//     spliced file's footer is the old one with only chunk offsets and sizes changed
//     (page index and bloom filter locations are dropped: both optional).
//   - The package imports no project package.
package parquet
