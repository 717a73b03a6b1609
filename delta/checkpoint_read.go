package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"
)

// checkpointColumns are the top-level checkpoint columns replay needs: the actions, and
// a V2 checkpoint's checkpointMetadata and sidecar. commitInfo and cdc are not read.
var checkpointColumns = map[string]bool{
	"add": true, "remove": true, "metaData": true, "protocol": true, "txn": true, "domainMetadata": true,
	"checkpointMetadata": true, "sidecar": true,
}

// sidecarDir is the directory of V2 checkpoint sidecar files, relative to _delta_log.
const sidecarDir = "_sidecars"

// checkpointReadParallelism bounds the checkpoint files (parts, sidecars) read at once.
const checkpointReadParallelism = 8

// checkpointData is a checkpoint as read.
type checkpointData struct {
	// actions are the checkpoint's actions with the sidecars' file actions, adds last
	// (so that a path present as both wins as live); no checkpointMetadata or sidecar.
	actions []Action
	// sidecars are the sidecar files the checkpoint references.
	sidecars []Sidecar
	// size is the bytes of the checkpoint's files and its sidecars together.
	size int64
}

// readCheckpoint reads every file of a checkpoint, and the sidecars a V2 spec checkpoint
// references, into actions. A UUID-named checkpoint must hold one checkpointMetadata
// action naming its version; a sidecar must be the size the checkpoint records.
func (t *Table) readCheckpoint(ctx context.Context, cp *checkpointRef) (*checkpointData, error) {
	parts := make([][]Action, len(cp.files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkpointReadParallelism)
	for i, f := range cp.files {
		g.Go(func() error {
			acts, err := t.readCheckpointFile(gctx, f.Key, strings.HasSuffix(f.Key, ".json"))
			if err != nil {
				return fmt.Errorf("%s: %w", f.Key, err)
			}
			parts[i] = acts
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	cd := &checkpointData{}
	for _, f := range cp.files {
		cd.size += f.Size
	}
	var (
		out  []Action
		meta []*CheckpointMetadata
	)
	for _, acts := range parts {
		for _, a := range acts {
			switch {
			case a.CheckpointMetadata != nil:
				meta = append(meta, a.CheckpointMetadata)
			case a.Sidecar != nil:
				cd.sidecars = append(cd.sidecars, *a.Sidecar)
			default:
				out = append(out, a)
			}
		}
	}
	name := cp.files[0].Key
	switch {
	case len(meta) > 1:
		return nil, fmt.Errorf("%s: %d checkpointMetadata actions; a V2 checkpoint holds exactly one", name, len(meta))
	case len(meta) == 0 && cp.kind == kindV2Checkpoint:
		return nil, fmt.Errorf("%s: a UUID-named checkpoint must hold a checkpointMetadata action", name)
	case len(meta) == 0 && len(cd.sidecars) > 0:
		return nil, fmt.Errorf("%s: sidecar actions without checkpointMetadata (only V2 checkpoints have sidecars)", name)
	case len(meta) == 1 && meta[0].Version != cp.version:
		return nil, fmt.Errorf("%s: checkpointMetadata says version %d, the file name %d", name, meta[0].Version, cp.version)
	}
	if len(cd.sidecars) > 0 {
		side, size, err := t.readSidecars(ctx, cd.sidecars)
		if err != nil {
			return nil, err
		}
		out = append(out, side...)
		cd.size += size
	}
	// Removes before adds.
	ordered := make([]Action, 0, len(out))
	for _, a := range out {
		if a.Add == nil {
			ordered = append(ordered, a)
		}
	}
	for _, a := range out {
		if a.Add != nil {
			ordered = append(ordered, a)
		}
	}
	t.canonicalizePaths(ordered)
	cd.actions = ordered
	return cd, nil
}

// readCheckpointFile reads and decodes one checkpoint file, JSON or Parquet.
func (t *Table) readCheckpointFile(ctx context.Context, key string, isJSON bool) ([]Action, error) {
	b, err := t.getAll(ctx, key)
	if err != nil {
		return nil, err
	}
	if isJSON {
		return DecodeActions(bytes.NewReader(b))
	}
	return decodeCheckpointParquet(ctx, b)
}

// readSidecars reads the file actions of a V2 checkpoint's sidecars, in parallel, and
// returns them with the sidecars' total size. Only add and remove actions may live in a
// sidecar; anything else there is an error.
func (t *Table) readSidecars(ctx context.Context, sidecars []Sidecar) ([]Action, int64, error) {
	got := make([][]Action, len(sidecars))
	sizes := make([]int64, len(sidecars))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkpointReadParallelism)
	for i, sc := range sidecars {
		g.Go(func() error {
			key, err := t.sidecarKey(sc.Path)
			if err != nil {
				return err
			}
			b, err := t.getAll(gctx, key)
			if err != nil {
				return fmt.Errorf("sidecar %s: %w", key, err)
			}
			if int64(len(b)) != sc.SizeInBytes {
				return fmt.Errorf("sidecar %s is %d bytes, but the checkpoint records %d", key, len(b), sc.SizeInBytes)
			}
			acts, err := decodeCheckpointParquet(gctx, b)
			if err != nil {
				return fmt.Errorf("sidecar %s: %w", key, err)
			}
			for _, a := range acts {
				if a.Add == nil && a.Remove == nil {
					return fmt.Errorf("sidecar %s: holds an action other than add or remove", key)
				}
			}
			got[i], sizes[i] = acts, int64(len(b))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	var (
		out   []Action
		total int64
	)
	for i := range got {
		out = append(out, got[i]...)
		total += sizes[i]
	}
	return out, total, nil
}

// sidecarKey is the store key of a sidecar path: a URI-encoded file name under
// _delta_log/_sidecars/, or an absolute URI that ends in that directory.
func (t *Table) sidecarKey(p string) (string, error) {
	name := p
	if i := strings.Index(p, "://"); i >= 0 || strings.HasPrefix(p, "/") {
		j := strings.LastIndex(p, "/"+logDirName+"/"+sidecarDir+"/")
		if j < 0 {
			return "", fmt.Errorf("sidecar path %q is not in this table's %s/%s directory", p, logDirName, sidecarDir)
		}
		name = p[j+len("/"+logDirName+"/"+sidecarDir+"/"):]
	}
	dec, err := url.PathUnescape(name)
	if err != nil {
		return "", fmt.Errorf("sidecar path %q: %w", p, err)
	}
	if dec == "" || strings.Contains(dec, "/") {
		return "", fmt.Errorf("sidecar path %q: want a file name in %s/%s", p, logDirName, sidecarDir)
	}
	return t.logPrefix() + sidecarDir + "/" + dec, nil
}

// decodeCheckpointParquet decodes one checkpoint Parquet file. Columns that are missing
// read as null; add.stats_parsed is used only when add.stats is absent, and
// partitionValues_parsed is never read (partitionValues is mandatory).
func decodeCheckpointParquet(ctx context.Context, b []byte) ([]Action, error) {
	pr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	mem := memory.DefaultAllocator
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 * 1024}, mem)
	if err != nil {
		return nil, err
	}
	sch := pr.MetaData().Schema
	hasStats := sch.ColumnIndexByName("add.stats") >= 0
	var cols []int
	for i := 0; i < sch.NumColumns(); i++ {
		path := sch.Column(i).ColumnPath()
		if len(path) == 0 || !checkpointColumns[path[0]] {
			continue
		}
		if len(path) > 1 && (path[0] == "add" || path[0] == "remove") {
			switch path[1] {
			case "partitionValues_parsed":
				continue
			case "stats_parsed":
				if hasStats || path[0] == "remove" {
					continue
				}
			}
		}
		cols = append(cols, i)
	}
	if len(cols) == 0 {
		return nil, nil
	}
	rgs := make([]int, pr.NumRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	tbl, err := fr.ReadRowGroups(ctx, cols, rgs)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	out := make([]Action, 0, tbl.NumRows())
	tr := array.NewTableReader(tbl, 64*1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		decodeCheckpointRecord(rec, &out)
	}
	if err := tr.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeCheckpointRecord appends one action per non-null top-level struct of each row.
func decodeCheckpointRecord(rec arrow.RecordBatch, out *[]Action) {
	sc := rec.Schema()
	var add, remove, md, proto, txn, dm, cpm, side *array.Struct
	for i, f := range sc.Fields() {
		s, ok := rec.Column(i).(*array.Struct)
		if !ok {
			continue
		}
		switch f.Name {
		case "add":
			add = s
		case "remove":
			remove = s
		case "metaData":
			md = s
		case "protocol":
			proto = s
		case "txn":
			txn = s
		case "domainMetadata":
			dm = s
		case "checkpointMetadata":
			cpm = s
		case "sidecar":
			side = s
		}
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		if add != nil && add.IsValid(i) {
			*out = append(*out, Action{Add: decodeAdd(add, i)})
		}
		if remove != nil && remove.IsValid(i) {
			*out = append(*out, Action{Remove: decodeRemove(remove, i)})
		}
		if md != nil && md.IsValid(i) {
			*out = append(*out, Action{MetaData: decodeMetadata(md, i)})
		}
		if proto != nil && proto.IsValid(i) {
			p := &Protocol{}
			v, _ := intAt(field(proto, "minReaderVersion"), i)
			p.MinReaderVersion = int(v)
			v, _ = intAt(field(proto, "minWriterVersion"), i)
			p.MinWriterVersion = int(v)
			p.ReaderFeatures = stringListAt(field(proto, "readerFeatures"), i)
			p.WriterFeatures = stringListAt(field(proto, "writerFeatures"), i)
			*out = append(*out, Action{Protocol: p})
		}
		if txn != nil && txn.IsValid(i) {
			x := &Txn{}
			x.AppID, _ = stringAt(field(txn, "appId"), i)
			x.Version, _ = intAt(field(txn, "version"), i)
			if v, ok := intAt(field(txn, "lastUpdated"), i); ok {
				x.LastUpdated = &v
			}
			*out = append(*out, Action{Txn: x})
		}
		if dm != nil && dm.IsValid(i) {
			d := &DomainMetadata{}
			d.Domain, _ = stringAt(field(dm, "domain"), i)
			d.Configuration, _ = stringAt(field(dm, "configuration"), i)
			d.Removed, _ = boolAt(field(dm, "removed"), i)
			*out = append(*out, Action{DomainMetadata: d})
		}
		if cpm != nil && cpm.IsValid(i) {
			m := &CheckpointMetadata{}
			m.Version, _ = intAt(field(cpm, "version"), i)
			m.Tags = stringMapAt(field(cpm, "tags"), i)
			*out = append(*out, Action{CheckpointMetadata: m})
		}
		if side != nil && side.IsValid(i) {
			x := &Sidecar{}
			x.Path, _ = stringAt(field(side, "path"), i)
			x.SizeInBytes, _ = intAt(field(side, "sizeInBytes"), i)
			x.ModificationTime, _ = intAt(field(side, "modificationTime"), i)
			x.Tags = stringMapAt(field(side, "tags"), i)
			*out = append(*out, Action{Sidecar: x})
		}
	}
}

func decodeAdd(s *array.Struct, i int) *Add {
	a := &Add{}
	a.Path, _ = stringAt(field(s, "path"), i)
	a.PartitionValues = stringPtrMapAt(field(s, "partitionValues"), i)
	if a.PartitionValues == nil {
		a.PartitionValues = map[string]*string{}
	}
	a.Size, _ = intAt(field(s, "size"), i)
	a.ModificationTime, _ = intAt(field(s, "modificationTime"), i)
	a.DataChange, _ = boolAt(field(s, "dataChange"), i)
	if st, ok := stringAt(field(s, "stats"), i); ok {
		a.Stats = st
	} else if sp, ok := field(s, "stats_parsed").(*array.Struct); ok && sp.IsValid(i) {
		if b, err := json.Marshal(sp.GetOneForMarshal(i)); err == nil {
			a.Stats = string(b)
		}
	}
	a.Tags = stringMapAt(field(s, "tags"), i)
	a.DeletionVector = decodeDV(field(s, "deletionVector"), i)
	if v, ok := intAt(field(s, "baseRowId"), i); ok {
		a.BaseRowID = &v
	}
	if v, ok := intAt(field(s, "defaultRowCommitVersion"), i); ok {
		a.DefaultRowCommitVersion = &v
	}
	a.ClusteringProvider, _ = stringAt(field(s, "clusteringProvider"), i)
	return a
}

func decodeRemove(s *array.Struct, i int) *Remove {
	r := &Remove{}
	r.Path, _ = stringAt(field(s, "path"), i)
	if v, ok := intAt(field(s, "deletionTimestamp"), i); ok {
		r.DeletionTimestamp = &v
	}
	r.DataChange, _ = boolAt(field(s, "dataChange"), i)
	r.ExtendedFileMetadata, _ = boolAt(field(s, "extendedFileMetadata"), i)
	r.PartitionValues = stringPtrMapAt(field(s, "partitionValues"), i)
	if v, ok := intAt(field(s, "size"), i); ok {
		r.Size = &v
	}
	r.Tags = stringMapAt(field(s, "tags"), i)
	r.DeletionVector = decodeDV(field(s, "deletionVector"), i)
	if v, ok := intAt(field(s, "baseRowId"), i); ok {
		r.BaseRowID = &v
	}
	if v, ok := intAt(field(s, "defaultRowCommitVersion"), i); ok {
		r.DefaultRowCommitVersion = &v
	}
	return r
}

func decodeDV(a arrow.Array, i int) *DeletionVector {
	s, ok := a.(*array.Struct)
	if !ok || !s.IsValid(i) {
		return nil
	}
	dv := &DeletionVector{}
	dv.StorageType, _ = stringAt(field(s, "storageType"), i)
	dv.PathOrInlineDv, _ = stringAt(field(s, "pathOrInlineDv"), i)
	if v, ok := intAt(field(s, "offset"), i); ok {
		o := int32(v)
		dv.Offset = &o
	}
	v, _ := intAt(field(s, "sizeInBytes"), i)
	dv.SizeInBytes = int32(v)
	dv.Cardinality, _ = intAt(field(s, "cardinality"), i)
	return dv
}

func decodeMetadata(s *array.Struct, i int) *Metadata {
	m := &Metadata{}
	m.ID, _ = stringAt(field(s, "id"), i)
	m.Name, _ = stringAt(field(s, "name"), i)
	m.Description, _ = stringAt(field(s, "description"), i)
	if f, ok := field(s, "format").(*array.Struct); ok && f.IsValid(i) {
		m.Format.Provider, _ = stringAt(field(f, "provider"), i)
		m.Format.Options = stringMapAt(field(f, "options"), i)
	}
	if m.Format.Provider == "" {
		m.Format.Provider = "parquet"
	}
	if m.Format.Options == nil {
		m.Format.Options = map[string]string{}
	}
	m.SchemaString, _ = stringAt(field(s, "schemaString"), i)
	m.PartitionColumns = stringListAt(field(s, "partitionColumns"), i)
	if m.PartitionColumns == nil {
		m.PartitionColumns = []string{}
	}
	m.Configuration = stringMapAt(field(s, "configuration"), i)
	if m.Configuration == nil {
		m.Configuration = map[string]string{}
	}
	if v, ok := intAt(field(s, "createdTime"), i); ok {
		m.CreatedTime = &v
	}
	return m
}

// field returns the child of a struct array by name, or nil when the column is absent.
func field(s *array.Struct, name string) arrow.Array {
	if s == nil {
		return nil
	}
	idx, ok := s.DataType().(*arrow.StructType).FieldIdx(name)
	if !ok {
		return nil
	}
	return s.Field(idx)
}

func stringAt(a arrow.Array, i int) (string, bool) {
	if a == nil || a.IsNull(i) {
		return "", false
	}
	switch v := a.(type) {
	case *array.String:
		return v.Value(i), true
	case *array.LargeString:
		return v.Value(i), true
	case *array.StringView:
		return v.Value(i), true
	case *array.Binary:
		return string(v.Value(i)), true
	case *array.LargeBinary:
		return string(v.Value(i)), true
	}
	return a.ValueStr(i), true
}

func intAt(a arrow.Array, i int) (int64, bool) {
	if a == nil || a.IsNull(i) {
		return 0, false
	}
	switch v := a.(type) {
	case *array.Int64:
		return v.Value(i), true
	case *array.Int32:
		return int64(v.Value(i)), true
	case *array.Int16:
		return int64(v.Value(i)), true
	case *array.Int8:
		return int64(v.Value(i)), true
	case *array.Uint32:
		return int64(v.Value(i)), true
	case *array.Uint64:
		return int64(v.Value(i)), true
	}
	return 0, false
}

func boolAt(a arrow.Array, i int) (bool, bool) {
	if b, ok := a.(*array.Boolean); ok && b.IsValid(i) {
		return b.Value(i), true
	}
	return false, false
}

// stringPtrMapAt reads a map<string,string> cell keeping null values as nil pointers.
func stringPtrMapAt(a arrow.Array, i int) map[string]*string {
	m, ok := a.(*array.Map)
	if !ok || m.IsNull(i) {
		return nil
	}
	start, end := m.ValueOffsets(i)
	keys, items := m.Keys(), m.Items()
	out := make(map[string]*string, end-start)
	for j := int(start); j < int(end); j++ {
		k, _ := stringAt(keys, j)
		if v, ok := stringAt(items, j); ok {
			out[k] = &v
		} else {
			out[k] = nil
		}
	}
	return out
}

// stringMapAt reads a map<string,string> cell; null values become "".
func stringMapAt(a arrow.Array, i int) map[string]string {
	pm := stringPtrMapAt(a, i)
	if pm == nil {
		return nil
	}
	out := make(map[string]string, len(pm))
	for k, v := range pm {
		if v != nil {
			out[k] = *v
		} else {
			out[k] = ""
		}
	}
	return out
}

// stringListAt reads an array<string> cell.
func stringListAt(a arrow.Array, i int) []string {
	if a == nil || a.IsNull(i) {
		return nil
	}
	var (
		start, end int64
		values     arrow.Array
	)
	switch l := a.(type) {
	case *array.List:
		start, end = l.ValueOffsets(i)
		values = l.ListValues()
	case *array.LargeList:
		start, end = l.ValueOffsets(i)
		values = l.ListValues()
	default:
		return nil
	}
	out := make([]string, 0, end-start)
	for j := start; j < end; j++ {
		s, _ := stringAt(values, int(j))
		out = append(out, s)
	}
	return out
}
