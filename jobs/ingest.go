package jobs

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
)

// Ingest loads new source files (a glob on a store, or an http(s) URL) into a bronze
// table, parsing values into the table's declared schema and adding the source_file and
// load_timestamp columns.
//
// Exactly once per source file: every file loaded is recorded as a txn action (appId
// "ingest:<table>:<file>") in the same commit as its rows, so a rerun skips it and a crash
// before the commit loses nothing. In append mode all new files of a run go into ONE
// commit: a bad record with on_error: fail stops the run naming file, line and column,
// and the table is unchanged. A large append is encoded by several writers at once (one
// per core, see ingestLanes), each with its own data files, all in that one commit. In
// upsert mode each file is merged by the keys in its own commit, in file name order, so a
// later file's correction of a row is an update (with pre- and post-images in the change
// feed); a bad file stops the run after the files before it. on_error: skip counts bad records in the result; quarantine also writes them,
// with the error text, to the quarantine table (first, under its own txn, so a rerun
// writes each bad record once).
type Ingest struct {
	name string
	cfg  *IngestConfig
}

// NewIngest returns the stage for a validated config.
func NewIngest(name string, cfg *IngestConfig) *Ingest {
	return &Ingest{name: name, cfg: cfg}
}

// Name implements Stage.
func (s *Ingest) Name() string { return s.name }

// Kind implements Stage.
func (s *Ingest) Kind() Kind { return KindIngest }

// Run implements Stage.
func (s *Ingest) Run(ctx context.Context, env *Env) (Result, error) {
	return timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
}

// keyed reports whether the stage holds its rows by key (upsert and snapshot modes).
func (s *Ingest) keyed() bool { return s.cfg.Mode == "upsert" || s.cfg.Mode == "snapshot" }

func (s *Ingest) sourceFileColumn() string { return or(s.cfg.SourceFileColumn, "source_file") }
func (s *Ingest) loadTimeColumn() string   { return or(s.cfg.LoadTimestampColumn, "load_timestamp") }

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Ingest) format(file string) decode.Format {
	if s.cfg.Format != "" {
		return decode.Format(s.cfg.Format)
	}
	return decode.Format(formatFromName(file))
}

func (s *Ingest) run(ctx context.Context, env *Env) (res Result, err error) {
	decl, err := env.declared(s.cfg.Target)
	if err != nil {
		return res, err
	}
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		return res, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	var files []*sourceFile
	if isURL(s.cfg.Source) {
		f, err := fetchURL(ctx, env, decl.Name, s.cfg.Source, s.cfg.HTTP)
		if err != nil {
			return res, err
		}
		files = []*sourceFile{f}
	} else if files, err = listSources(ctx, env, decl.Name, s.cfg.Source); err != nil {
		return res, err
	}
	var todo []*sourceFile
	for _, f := range files {
		if v, ok := snap.TxnVersion(f.ID); ok && (!isURL(f.Name) || v == f.Version) {
			continue // loaded before
		}
		todo = append(todo, f)
	}
	if skipped := len(files) - len(todo); skipped > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d source files already loaded", skipped, len(files)))
	}
	if len(todo) == 0 {
		if len(files) == 0 {
			res.Notes = append(res.Notes, "no source files match "+s.cfg.Source)
		}
		return res, nil
	}
	if err := checkNotEmpty(todo); err != nil {
		return res, err
	}
	reportFiles(env, todo)
	if len(env.Expectations) > 0 { // (an environment without any is left untouched)
		if env.rows, err = newRowChecks(s.name, decl.Name, env.Expectations); err != nil {
			return res, err
		}
		defer func() { res.Expectations = env.rows.results() }()
	}
	loadTime := env.Now().UTC().Truncate(time.Microsecond)
	// An append's rows count as written as they are decoded, a keyed ingest's when its
	// MERGE writes them; a failed run reports only what it committed: the files before
	// the failing one of an upsert, nothing of an append.
	if s.cfg.Mode == "snapshot" && s.cfg.SnapshotDate != nil {
		err = s.loadBacklog(ctx, env, decl, tbl, snap, todo, loadTime, &res)
	} else if s.cfg.Mode == "snapshot" {
		err = s.loadSnapshot(ctx, env, decl, tbl, todo, loadTime, &res)
	} else if s.cfg.Mode == "upsert" {
		err = s.loadKeyed(ctx, env, decl, tbl, todo, loadTime, &res)
	} else if err = s.appendFiles(ctx, env, decl, tbl, snap, todo, loadTime, &res); err != nil {
		res.RowsWritten = 0
	}
	return res, err
}

// ingestWriterMemory bounds what the data writers buffer (shared equally by the lanes of
// a parallel append): open row groups, which are flushed to the store as they fill (an
// unpartitioned table's files are streamed, others spill finished file bytes to temporary
// files). Ingest memory stays near this plus the decoder's batches, whatever the size of
// the load.
const ingestWriterMemory = 64 << 20

// decodeSchema is the part of the table's schema that comes from the files: every column
// but the lineage columns. In upsert and snapshot modes the key columns are NOT NULL: a
// row without a key is a bad record (file, line and column), which on_error decides.
func (s *Ingest) decodeSchema(table *delta.StructType) *delta.StructType {
	out := &delta.StructType{}
	for _, f := range table.Fields {
		if strings.EqualFold(f.Name, s.sourceFileColumn()) || strings.EqualFold(f.Name, s.loadTimeColumn()) {
			continue
		}
		if f.Nullable && s.cfg.Mode != "" && s.cfg.Mode != "append" && slices.ContainsFunc(s.cfg.Keys, func(k string) bool { return strings.EqualFold(k, f.Name) }) {
			key := *f
			key.Nullable = false
			f = &key
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}

// appendFiles writes every new file's rows and commits them with one txn per file.
func (s *Ingest) appendFiles(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, res *Result) error {
	var sourceBytes int64
	for _, f := range files {
		sourceBytes += f.Size
	}
	opts := delta.WriteOptions{MaxMemory: ingestWriterMemory, StreamFiles: len(snap.PartitionColumns()) == 0}
	writer, err := newParallelWriter(ctx, snap, ingestLanes(sourceBytes), opts)
	if err != nil {
		return err
	}
	var quarantine []*badRecord
	for _, f := range files {
		bad, err := s.decodeFile(ctx, env, snap, f, loadTime, res, func(rec arrow.RecordBatch) error {
			return writer.write(rec, f.Name)
		})
		if err != nil {
			writer.abort()
			return err
		}
		quarantine = append(quarantine, bad...)
	}
	adds, err := writer.close()
	if err != nil {
		return err
	}
	if err := s.quarantine(ctx, env, files, quarantine, loadTime, res); err != nil {
		return err
	}
	v, err := commitAppend(ctx, env, decl, tbl, snap, files, adds, res.RowsWritten, nil, res)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("loaded %d files into %s version %d", len(files), decl.Name, v))
	return nil
}

// commitAppend commits adds (rows rows of files) as one WRITE (Append) with a txn per
// file (and a snapshot's time, asOf, when set), and counts it in res.
func commitAppend(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, adds []*delta.Add, rows int64, asOf *int64, res *Result) (int64, error) {
	lineage := env.lineage()
	lineage.SourceFiles = fileNames(files)
	var bytesOut int64
	for _, a := range adds {
		bytesOut += a.Size
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": partitionByJSON(snap.PartitionColumns())},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": rows, "numOutputBytes": bytesOut},
		Lineage:             lineage,
	})
	tx.AddFiles(adds...)
	setSnapshotTxns(tx, files, asOf)
	v, err := tx.Commit(ctx)
	if err != nil {
		return 0, fmt.Errorf("commit to %s: %w", decl.Name, err)
	}
	res.FilesWritten += int64(len(adds))
	res.BytesWritten += bytesOut
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: v})
	return v, nil
}

// countMerge counts a keyed MERGE of files into decl in res.
func countMerge(res *Result, decl *Table, names []string, mr *delta.MergeResult) {
	res.RowsWritten += mr.NumTargetRowsInserted + mr.NumTargetRowsUpdated + mr.NumTargetRowsDeleted
	res.FilesWritten += mr.NumTargetFilesAdded
	res.BytesWritten += mr.NumTargetBytesAdded
	if mr.Committed {
		res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: decl.Name, Version: mr.Version})
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d inserted, %d updated, %d deleted", strings.Join(names, ", "), mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
}

func fileNames(files []*sourceFile) []string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return names
}

// badRecord is a record on_error skipped or quarantined.
type badRecord struct {
	file string
	err  *decode.Error
	// expectation names the row expectation the record violated ("": it did not decode).
	expectation string
}

// decodeFile decodes one source file into batches of the table's schema (lineage
// columns added) and hands each to emit.
func (s *Ingest) decodeFile(ctx context.Context, env *Env, snap *delta.Snapshot, f *sourceFile, loadTime time.Time, res *Result, emit func(arrow.RecordBatch) error) ([]*badRecord, error) {
	return s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{}, emit)
}

// decodeExtras are what a keyed ingest decodes besides the table's columns: the file
// columns delete_when reads that the table lacks (as strings), and with lines each
// row's line (lineColumn). They follow the table's columns in each batch.
type decodeExtras struct {
	columns []string
	lines   bool
}

// decodeFileWith is decodeFile with extras.
func (s *Ingest) decodeFileWith(ctx context.Context, env *Env, snap *delta.Snapshot, f *sourceFile, loadTime time.Time, res *Result, extras decodeExtras, emit func(arrow.RecordBatch) error) ([]*badRecord, error) {
	format := s.format(f.Name)
	r, done, err := openSourceFile(ctx, f, format)
	if err != nil {
		return nil, err
	}
	defer done()
	openedSource(f.Name)
	var bad []*badRecord
	checks, strip := env.rows, ""
	if checks != nil && checks.lines && !extras.lines {
		extras.lines, strip = true, lineColumn // for the checks only
	}
	opts, target, err := s.decodeOptions(snap.Schema(), format, extras, func(e *decode.Error) {
		bad = append(bad, &badRecord{file: f.Name, err: e})
	})
	if err != nil {
		return nil, err
	}
	opts.AddedLater = addedAfter(snap.Schema(), f.Version)
	rd, err := decode.NewReader(ctx, r, f.Name, opts)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	lin := &lineageColumns{file: f.Name, loadTime: loadTime}
	defer lin.release()
	var checkedRows int64 // rows of the file checked so far
	for rd.Next() {
		rec, err := s.withLineage(rd.RecordBatch(), target, lin)
		if err != nil {
			return nil, err
		}
		if err := f.dated.check(f, rec); err != nil {
			rec.Release()
			return nil, err
		}
		read, n := rec.NumRows(), int64(0)
		parts := []arrow.RecordBatch{rec}
		if checks != nil {
			kept, violators, err := checks.check(rec, f.Name, checkedRows, strip)
			rec.Release()
			if err != nil {
				return nil, err
			}
			checkedRows += read
			parts, bad = kept, append(bad, violators...)
		}
		for i, part := range parts {
			if err == nil {
				err = emit(part)
				n += part.NumRows()
			}
			part.Release()
			parts[i] = nil
		}
		if err != nil {
			return nil, err // emit's errors name the file
		}
		res.RowsSkipped += read - n
		res.RowsRead += read
		if !s.keyed() { // (a keyed ingest's rows count as written when its MERGE writes them)
			res.RowsWritten += n
		}
		report(env, res.RowsRead, res.RowsWritten)
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if missing := rd.MissingColumns(); len(missing) > 0 {
		why := "allow_missing_columns"
		if !s.cfg.AllowMissingColumns {
			why = "added to the table after the file was written"
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s lacks the columns %s: filled with NULL (%s)", f.Name, strings.Join(missing, ", "), why))
	}
	res.FilesRead++
	res.BytesRead += f.Size
	reportRead(env, res)
	// Bad records were read too: rows read counts every record of the file (rows that
	// row expectations quarantined were counted above).
	decoded := 0
	for _, b := range bad {
		if b.expectation == "" {
			decoded++
		}
	}
	res.RowsRead += int64(decoded)
	res.RowsSkipped += int64(decoded)
	return bad, nil
}

// addedAfter names the columns of a table's schema that an evolution added after
// modMillis, a source file's modification time: the file may lack them.
func addedAfter(table *delta.StructType, modMillis int64) []string {
	var out []string
	for _, f := range table.Fields {
		if at, ok := delta.ColumnAddedAt(f); ok && at.UnixMilli() > modMillis {
			out = append(out, f.Name)
		}
	}
	return out
}

// openSourceFile opens a source file to decode: a Parquet file for random access, any
// other as a stream. done closes it.
func openSourceFile(ctx context.Context, f *sourceFile, format decode.Format) (r io.Reader, done func(), err error) {
	if format == decode.Parquet {
		ra, done, err := randomAccess(ctx, f)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", f.Name, err)
		}
		return ra, done, nil
	}
	rc, err := f.open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	return rc, func() { rc.Close() }, nil
}

// decodeOptions are the decoder's options for a file of format into a table of schema
// table, from the stage's config, with extras; onBad takes the records the decoder skips.
// target is the schema of the records decoded, with their lineage columns.
func (s *Ingest) decodeOptions(table *delta.StructType, format decode.Format, extras decodeExtras, onBad func(*decode.Error)) (opts decode.Options, target *arrow.Schema, err error) {
	onError := decode.Fail
	if s.cfg.OnError == "skip" || s.cfg.OnError == "quarantine" {
		onError = decode.Skip
	}
	schema := s.decodeSchema(table)
	target, err = delta.ArrowSchema(table)
	if err != nil {
		return opts, nil, err
	}
	for _, name := range extras.columns {
		if table.Field(name) != nil || schema.Field(name) != nil {
			continue
		}
		schema = &delta.StructType{Fields: append(append([]*delta.StructField(nil), schema.Fields...), &delta.StructField{Name: name, Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true})}
		target = arrow.NewSchema(append(append([]arrow.Field(nil), target.Fields()...), arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	}
	lines := ""
	if extras.lines {
		lines = lineColumn
		target = arrow.NewSchema(append(append([]arrow.Field(nil), target.Fields()...), arrow.Field{Name: lineColumn, Type: arrow.PrimitiveTypes.Int64}), nil)
	}
	opts = decode.Options{
		Schema:              schema,
		Format:              format,
		BatchSize:           s.cfg.BatchSize,
		LineColumn:          lines,
		AllowMissingColumns: s.cfg.AllowMissingColumns,
		OnError:             onError,
		OnBadRecord:         onBad,
		CSV: decode.CSVOptions{
			NoHeader:        s.cfg.CSV.Header != nil && !*s.cfg.CSV.Header,
			NullString:      s.cfg.CSV.NullString,
			TimestampFormat: s.cfg.CSV.TimestampFormat,
		},
	}
	if d := s.cfg.CSV.Delimiter; d != "" {
		opts.CSV.Delimiter = d[0]
	}
	if q := s.cfg.CSV.Quote; q != "" {
		opts.CSV.Quote = q[0]
	}
	if tz := s.cfg.CSV.TimeZone; tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return opts, nil, err
		}
		opts.Location = loc
	}
	return opts, target, nil
}

// withLineage builds a batch in the table's column order from a decoded batch plus the
// source_file and load_timestamp columns.
func (s *Ingest) withLineage(rec arrow.RecordBatch, target *arrow.Schema, lin *lineageColumns) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(target.Fields()))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	byName := map[string]int{}
	for i, f := range rec.Schema().Fields() {
		byName[strings.ToLower(f.Name)] = i
	}
	for i, f := range target.Fields() {
		switch {
		case strings.EqualFold(f.Name, s.sourceFileColumn()):
			cols[i] = lin.sourceFile(n)
		case strings.EqualFold(f.Name, s.loadTimeColumn()):
			cols[i] = lin.loadTimestamp(n, f.Type.(*arrow.TimestampType))
		default:
			j, ok := byName[strings.ToLower(f.Name)]
			if !ok {
				return nil, fmt.Errorf("internal: decoded batch lacks column %s", f.Name)
			}
			cols[i] = rec.Column(j)
			cols[i].Retain()
		}
	}
	return array.NewRecordBatch(target, cols, int64(n)), nil
}

// lineageColumns holds one file's source_file and load_timestamp columns, built once as
// long as its longest batch; every batch of the file gets a slice of them, sharing the
// buffers, instead of a copy of the file name per row.
type lineageColumns struct {
	file     string
	loadTime time.Time
	src, ts  arrow.Array // nil until needed
}

// sourceFile returns n rows of the file name (the caller releases them).
func (l *lineageColumns) sourceFile(n int) arrow.Array {
	if l.src == nil || l.src.Len() < n {
		if l.src != nil {
			l.src.Release()
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.Reserve(n)
		b.ReserveData(n * len(l.file))
		for range n {
			b.Append(l.file)
		}
		l.src = b.NewArray()
		b.Release()
	}
	return array.NewSlice(l.src, 0, int64(n))
}

// loadTimestamp returns n rows of the load time (the caller releases them).
func (l *lineageColumns) loadTimestamp(n int, typ *arrow.TimestampType) arrow.Array {
	if l.ts == nil || l.ts.Len() < n || !arrow.TypeEqual(l.ts.DataType(), typ) {
		if l.ts != nil {
			l.ts.Release()
		}
		b := array.NewTimestampBuilder(memory.DefaultAllocator, typ)
		b.Reserve(n)
		ts := arrow.Timestamp(l.loadTime.UnixMicro())
		for range n {
			b.UnsafeAppend(ts)
		}
		l.ts = b.NewArray()
		b.Release()
	}
	return array.NewSlice(l.ts, 0, int64(n))
}

func (l *lineageColumns) release() {
	for _, a := range []arrow.Array{l.src, l.ts} {
		if a != nil {
			a.Release()
		}
	}
}

func partitionByJSON(cols []string) string {
	if len(cols) == 0 {
		return "[]"
	}
	return `["` + strings.Join(cols, `","`) + `"]`
}

// checkNotEmpty refuses a run with a 0-byte source file before anything is read: no
// format's file is empty (a CSV has a header), so it is a transfer that failed or has not
// finished, which a snapshot would read as a table without rows.
func checkNotEmpty(files []*sourceFile) error {
	for _, f := range files {
		if f.Size == 0 {
			return fmt.Errorf("source file %s is empty (0 bytes): a transfer that failed or has not finished? Nothing was loaded; replace the file (or remove it) and run again", f.Name)
		}
	}
	return nil
}
