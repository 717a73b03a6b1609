package delta

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// mergeSource is the MERGE source in memory: its rows as one record (columns that the
// target also has converted to the target's types), a hash of its keys, and the sorted
// distinct key values for file pruning.
type mergeSource struct {
	rec     arrow.RecordBatch // source columns, target types where shared
	view    arrow.RecordBatch // the same arrays named "source.<col>"
	schema  *StructType
	n       int64
	keyCols []int        // rec column of each key
	index   *sourceIndex // encoded keys (unless ints)
	ints    *intKeys     // a single integer key (not null-safe), instead of index
	keyVals []*keyValues // per key: its values, for file pruning
}

func (s *mergeSource) release() {
	if s.rec != nil {
		s.rec.Release()
	}
	if s.view != nil {
		s.view.Release()
	}
}

// loadSource reads opts.Source (Merge has already drained SourceReader into it).
func loadSource(ctx context.Context, snap *Snapshot, opts MergeOptions, plan *mergePlan) (*mergeSource, error) {
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for _, r := range opts.Source {
		r.Retain()
		batches = append(batches, r)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var in *arrow.Schema
	if len(batches) > 0 {
		in = batches[0].Schema()
	} else {
		as, err := ArrowSchema(plan.schema)
		if err != nil {
			return nil, err
		}
		in = as
	}
	src := &mergeSource{}
	var outFields []arrow.Field
	var err error
	if src.schema, outFields, err = sourceSchema(in, plan); err != nil {
		return nil, err
	}
	cols, err := conformSource(batches, in, src.schema, outFields)
	if err != nil {
		return nil, err
	}
	defer arrowx.ReleaseArrays(cols)
	arrowx.SettleNullCounts(cols) // (the files are merged on several goroutines)
	var n int64
	if len(cols) > 0 {
		n = int64(cols[0].Len())
	}
	src.n = n
	src.rec = array.NewRecordBatch(arrow.NewSchema(outFields, nil), cols, n)
	viewFields := make([]arrow.Field, len(outFields))
	for i, f := range outFields {
		f.Name = "source." + f.Name
		viewFields[i] = f
	}
	src.view = array.NewRecordBatch(arrow.NewSchema(viewFields, nil), cols, n)
	if err := plan.bindClauses(opts, src.schema); err != nil {
		src.release()
		return nil, err
	}
	for _, k := range plan.keys {
		i := src.schema.FieldIndex(k)
		if i < 0 {
			src.release()
			return nil, fmt.Errorf("key column %s is not in the source", k)
		}
		src.keyCols = append(src.keyCols, i)
	}
	if opts.Positions != nil {
		return src, nil // the caller matched the rows: no index
	}
	if err := src.buildIndex(plan); err != nil {
		src.release()
		return nil, err
	}
	return src, nil
}

// conformSource conforms the source records (of schema in) to the source's schema
// (schema; Arrow fields outFields), column by column, and concatenates each column's
// parts into one array. The columns are done at once on the cores.
func conformSource(batches []arrow.RecordBatch, in *arrow.Schema, schema *StructType, outFields []arrow.Field) ([]arrow.Array, error) {
	for _, b := range batches {
		if !b.Schema().Equal(in) {
			return nil, fmt.Errorf("source records have different schemas: %s and %s", in, b.Schema())
		}
	}
	mem := memory.DefaultAllocator
	cols := make([]arrow.Array, len(outFields))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range schema.Fields {
		g.Go(func() error {
			parts := make([]arrow.Array, 0, len(batches))
			defer func() { arrowx.ReleaseArrays(parts) }()
			for _, b := range batches {
				c, err := dschema.ConformArray(mem, b.Column(i), outFields[i].Type, f.Name, f.Type)
				if err != nil {
					return fmt.Errorf("source: %w", err)
				}
				parts = append(parts, c)
			}
			var err error
			switch len(parts) {
			case 0:
				cols[i] = array.MakeArrayOfNull(mem, outFields[i].Type, 0)
			case 1:
				cols[i], parts = parts[0], nil
			default:
				if cols[i], err = array.Concatenate(parts, mem); err != nil {
					return fmt.Errorf("source: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		arrowx.ReleaseArrays(cols)
		return nil, err
	}
	return cols, nil
}

// sourceSchema is the schema the MERGE reads the source in (in is the source's): a
// column the target has takes the target's type, any other keeps its own; every column
// is nullable.
func sourceSchema(in *arrow.Schema, plan *mergePlan) (*StructType, []arrow.Field, error) {
	schema := &StructType{}
	var outFields []arrow.Field
	for _, f := range in.Fields() {
		for _, g := range schema.Fields {
			if strings.EqualFold(g.Name, f.Name) {
				return nil, nil, fmt.Errorf("source column %s appears twice", f.Name)
			}
		}
		tf := plan.schema.Field(f.Name)
		if tf != nil {
			at, err := ArrowType(tf.Type)
			if err != nil {
				return nil, nil, err
			}
			schema.Fields = append(schema.Fields, &StructField{Name: tf.Name, Type: tf.Type, Nullable: true, Metadata: tf.Metadata})
			outFields = append(outFields, arrow.Field{Name: tf.Name, Type: at, Nullable: true})
			continue
		}
		dt, err := DataTypeFromArrow(f.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("source column %s: %w", f.Name, err)
		}
		schema.Fields = append(schema.Fields, &StructField{Name: f.Name, Type: dt, Nullable: true})
		outFields = append(outFields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: true})
	}
	return schema, outFields, nil
}

// buildIndex hashes the source keys and collects their distinct values.
func (s *mergeSource) buildIndex(plan *mergePlan) error {
	n := int(s.n)
	if g, ok := arrowx.IntGetter(s.rec.Column(s.keyCols[0])); ok && len(s.keyCols) == 1 && !plan.nullSafe {
		s.ints = newIntKeys(s.rec.Column(s.keyCols[0]), g, n)
		return s.collectKeyValues(plan)
	}
	enc, err := newKeyEncoder(s.rec, s.keyCols, plan.nullSafe)
	if err != nil {
		return err
	}
	s.index = newSourceIndex(n)
	var b keyBatch
	for lo := 0; lo < n; lo += probeBatch {
		b.encode(enc, lo, min(probeBatch, n-lo)) // (a null key matches nothing: not added)
		s.index.addBatch(&b, lo)
	}
	return s.collectKeyValues(plan)
}

// distinctKeys is the number of distinct non-null (or, null-safe, any) source keys.
func (s *mergeSource) distinctKeys() int {
	if s.ints != nil {
		return s.ints.n
	}
	return s.index.len()
}

// keyEncoder turns the key columns of a row into bytes that are equal exactly when the
// keys are equal (= semantics; with nullSafe, null equals null).
type keyEncoder struct {
	parts    []func(buf []byte, i int) []byte
	arrs     []arrow.Array
	nullSafe bool
}

func newKeyEncoder(rec arrow.RecordBatch, cols []int, nullSafe bool) (*keyEncoder, error) {
	e := &keyEncoder{nullSafe: nullSafe}
	for _, c := range cols {
		arr := rec.Column(c)
		f, err := keyPart(arr)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", rec.ColumnName(c), err)
		}
		e.parts = append(e.parts, f)
		e.arrs = append(e.arrs, arr)
	}
	return e, nil
}

// key appends row i's key; ok is false when a key is null and comparisons are not
// null-safe (the row matches nothing).
func (e *keyEncoder) key(buf []byte, i int) ([]byte, bool) {
	for k, f := range e.parts {
		if e.arrs[k].IsNull(i) {
			if !e.nullSafe {
				return buf, false
			}
			buf = append(buf, 0)
			continue
		}
		buf = append(buf, 1)
		buf = f(buf, i)
	}
	return buf, true
}

// keyString renders row i's key for error messages: (k1=v1, k2=v2).
func (e *keyEncoder) keyString(names []string, i int) string {
	parts := make([]string, len(e.arrs))
	for k, a := range e.arrs {
		v := "NULL"
		if a.IsValid(i) {
			v = a.ValueStr(i)
		}
		parts[k] = names[k] + "=" + v
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func keyPart(arr arrow.Array) (func(buf []byte, i int) []byte, error) {
	if g, ok := arrowx.IntGetter(arr); ok {
		return func(buf []byte, i int) []byte { return binary.LittleEndian.AppendUint64(buf, uint64(g(i))) }, nil
	}
	switch a := arr.(type) {
	case *array.String:
		return func(buf []byte, i int) []byte {
			s := a.Value(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			return append(buf, s...)
		}, nil
	case *array.Binary:
		return func(buf []byte, i int) []byte {
			s := a.Value(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			return append(buf, s...)
		}, nil
	case *array.Date32:
		return func(buf []byte, i int) []byte { return binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i))) }, nil
	case *array.Timestamp:
		return func(buf []byte, i int) []byte { return binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i))) }, nil
	case *array.Boolean:
		return func(buf []byte, i int) []byte { return append(buf, boolByte(a.Value(i))) }, nil
	case *array.Decimal128:
		return func(buf []byte, i int) []byte {
			v := a.Value(i)
			buf = binary.LittleEndian.AppendUint64(buf, v.LowBits())
			return binary.LittleEndian.AppendUint64(buf, uint64(v.HighBits()))
		}, nil
	case *array.Float64:
		return func(buf []byte, i int) []byte { return appendFloatKey(buf, a.Value(i)) }, nil
	case *array.Float32:
		return func(buf []byte, i int) []byte { return appendFloatKey(buf, float64(a.Value(i))) }, nil
	}
	return nil, fmt.Errorf("type %s cannot be a merge key", arr.DataType())
}

// appendFloatKey normalises -0 to 0 and every NaN to one NaN (Spark's join semantics).
func appendFloatKey(buf []byte, f float64) []byte {
	switch {
	case f == 0:
		f = 0
	case f != f:
		f = math.NaN()
	}
	return binary.LittleEndian.AppendUint64(buf, math.Float64bits(f))
}

// partitionPredicate is what the merge read, for conflict detection: the partitions that
// can hold a source key (every partition unless a key column is a partition column).
func (s *mergeSource) partitionPredicate(plan *mergePlan, snap *Snapshot) PartitionPredicate {
	isPart := map[string]bool{}
	for _, c := range snap.PartitionColumns() {
		isPart[strings.ToLower(c)] = true
	}
	keyed := false
	for _, k := range plan.keys {
		keyed = keyed || isPart[strings.ToLower(k)]
	}
	if !keyed {
		return func(map[string]*string) bool { return true }
	}
	return func(pv map[string]*string) bool {
		ok, err := s.mayHoldKeys(plan, &Add{PartitionValues: pv}, isPart)
		return err != nil || ok
	}
}

// prober finds the source row whose key equals a target row's.
type prober struct {
	src   *mergeSource
	enc   *keyEncoder
	ints  func(int) int64
	arr   arrow.Array
	batch keyBatch
}

func (s *mergeSource) newProber(rec arrow.RecordBatch, cols []int, nullSafe bool) (*prober, error) {
	p := &prober{src: s}
	if s.ints != nil {
		p.arr = rec.Column(cols[0])
		g, ok := arrowx.IntGetter(p.arr)
		if !ok {
			return nil, fmt.Errorf("key column %s: target type %s differs from the source", rec.ColumnName(cols[0]), p.arr.DataType())
		}
		p.ints = g
	}
	enc, err := newKeyEncoder(rec, cols, nullSafe)
	if err != nil {
		return nil, err
	}
	p.enc = enc
	return p, nil
}

// probe looks up target rows lo .. lo+n-1 (n at most probeBatch); the batch is valid
// until the next call.
func (p *prober) probe(lo, n int) *keyBatch {
	b := &p.batch
	b.n = n
	if p.ints != nil {
		for j := 0; j < n; j++ {
			b.hit[j] = 0
			i := lo + j
			if p.arr.IsNull(i) {
				continue
			}
			b.row[j], b.hit[j] = p.src.ints.lookup(p.ints(i))
		}
		return b
	}
	b.encode(p.enc, lo, n)
	p.src.index.lookupBatch(b)
	return b
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
