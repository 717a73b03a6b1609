package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// EngineVersion is the orchestrator version recorded in commitInfo.engineInfo
// ("orchestrator/<EngineVersion>"). main may set it at link time.
var EngineVersion = "dev"

// Options are the dependencies of a Table. The zero value is usable.
type Options struct {
	// Now is the clock for commit timestamps, tombstone deletion times and retention
	// checks. Default time.Now.
	Now func() time.Time
	// EngineInfo goes into commitInfo.engineInfo. Default "orchestrator/<EngineVersion>".
	EngineInfo string
	// UserName goes into commitInfo.userName. Default the OS user.
	UserName string
	// Logger receives non-fatal problems (a stale _last_checkpoint, a failed checkpoint
	// after a successful commit). Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EngineInfo == "" {
		o.EngineInfo = "orchestrator/" + EngineVersion
	}
	if o.UserName == "" {
		if u, err := user.Current(); err == nil {
			o.UserName = u.Username
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Table is a Delta table at a root inside an object store. It is safe for concurrent use;
// snapshots it returns are immutable.
type Table struct {
	store objectstore.Store
	root  string // key prefix of the table root, no trailing slash; "" = store root
	opts  Options

	mu     sync.Mutex // guards latest
	latest *Snapshot  // newest snapshot loaded so far, the base for incremental refresh
}

// Store returns the object store the table lives in.
func (t *Table) Store() objectstore.Store { return t.store }

// Root returns the table root, a key prefix inside the store ("" = the store root).
func (t *Table) Root() string { return t.root }

// Key returns the store key of a path relative to the table root (as found, URL-decoded,
// in add.path).
func (t *Table) Key(rel string) string { return t.key(rel) }

// Options returns the table's options with defaults filled in.
func (t *Table) Options() Options { return t.opts }

func newTable(store objectstore.Store, root string, opts Options) (*Table, error) {
	if strings.HasSuffix(root, "/") {
		return nil, fmt.Errorf("table root %q: must not end with a slash", root)
	}
	if root != "" {
		if err := objectstore.ValidateKey(root); err != nil {
			return nil, fmt.Errorf("table root %q: %w", root, err)
		}
	}
	return &Table{store: store, root: root, opts: opts.withDefaults()}, nil
}

// Open opens the Delta table at root and loads its latest snapshot, which also runs the
// reader protocol gate. It fails if root has no _delta_log.
func Open(ctx context.Context, store objectstore.Store, root string, opts Options) (*Table, error) {
	t, err := newTable(store, root, opts)
	if err != nil {
		return nil, fmt.Errorf("open table %s: %w", root, err)
	}
	if _, err := t.Snapshot(ctx); err != nil {
		return nil, fmt.Errorf("open table %s: %w", t.displayRoot(), err)
	}
	return t, nil
}

// Exists reports whether root holds a Delta table: a _delta_log with at least one
// commit or checkpoint file.
func Exists(ctx context.Context, store objectstore.Store, root string) (bool, error) {
	t, err := newTable(store, root, Options{})
	if err != nil {
		return false, err
	}
	infos, err := t.store.List(ctx, t.logPrefix(), "")
	if err != nil {
		return false, fmt.Errorf("list %s: %w", t.logPrefix(), err)
	}
	for _, info := range infos {
		if _, ok := parseLogFile(strings.TrimPrefix(info.Key, t.logPrefix())); ok {
			return true, nil
		}
	}
	return false, nil
}

func (t *Table) displayRoot() string {
	if t.root == "" {
		return "(store root)"
	}
	return t.root
}

// CreateOptions describe a new table.
type CreateOptions struct {
	Schema           *StructType
	PartitionColumns []string
	// ClusterBy makes the table clustered (liquid clustering) on these columns, named
	// as in the schema (nested fields dotted): the clustering writer feature and the
	// delta.clustering domain. A table is partitioned or clustered, not both.
	ClusterBy []string
	// Properties become metaData.configuration (e.g. delta.enableChangeDataFeed,
	// delta.checkpointInterval, delta.logRetentionDuration).
	Properties  map[string]string
	Name        string
	Description string
	// Lineage is recorded in the commitInfo of version 0.
	Lineage *Lineage
}

// ErrTableExists is returned by Create when the root already holds a Delta log.
var ErrTableExists = errors.New("table already exists")

// Create creates a Delta table at root: version 0 with protocol, metaData and a
// "CREATE TABLE" commitInfo. The protocol is (1,2), or (1,7) with explicit writer
// features when change data feed or identity columns are used, or (3,7) with
// timestampNtz when a timestamp_ntz column exists. Creating over an existing table fails
// with ErrTableExists.
func Create(ctx context.Context, store objectstore.Store, root string, co CreateOptions, opts Options) (*Table, error) {
	t, err := newTable(store, root, opts)
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", root, err)
	}
	md, err := newMetadata(co, t.opts.Now())
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", t.displayRoot(), err)
	}
	if files, err := t.listLog(ctx, -1); err != nil {
		return nil, fmt.Errorf("create table %s: %w", t.displayRoot(), err)
	} else if len(files) > 0 {
		return nil, fmt.Errorf("create table %s: %w", t.displayRoot(), ErrTableExists)
	}
	schema, _ := md.Schema()
	clustering, err := clusteringDomainOf(schema, co.ClusterBy, co.PartitionColumns, md.Configuration)
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", t.displayRoot(), err)
	}
	proto := newTableProtocol(schema, md.Configuration)
	if clustering != nil {
		proto = withWriterFeature(withWriterFeature(proto, FeatureDomainMetadata), FeatureClustering)
	}
	partBy, _ := json.Marshal(md.PartitionColumns)
	props, _ := json.Marshal(md.Configuration)
	params := map[string]any{
		"isManaged":   "false",
		"description": nilIfEmpty(co.Description),
		"partitionBy": string(partBy),
		"properties":  string(props),
	}
	tx := t.NewTransaction(nil, TxOptions{Operation: "CREATE TABLE", OperationParameters: params, Lineage: co.Lineage})
	tx.UpdateProtocol(proto)
	tx.UpdateMetadata(md)
	if clustering != nil {
		tx.setSystemDomain(clustering)
		params["clusterBy"] = clusterByParam(co.ClusterBy)
	}
	if _, err := tx.Commit(ctx); err != nil {
		if errors.Is(err, objectstore.ErrExist) {
			err = ErrTableExists
		}
		return nil, fmt.Errorf("create table %s: %w", t.displayRoot(), err)
	}
	return t, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// newMetadata validates CreateOptions into a metaData action.
func newMetadata(co CreateOptions, now time.Time) (*Metadata, error) {
	if co.Schema == nil || len(co.Schema.Fields) == 0 {
		return nil, errors.New("schema has no columns")
	}
	var maxID int64
	if columnMappingOn(co.Properties) {
		// Every column gets an id and a physical name of its own (as Spark names them).
		st, err := cloneSchema(co.Schema)
		if err != nil {
			return nil, err
		}
		maxID = assignColumnMapping(st, maxColumnID(&Metadata{}, st), false)
		co.Schema = st
	}
	ss, err := co.Schema.SchemaString()
	if err != nil {
		return nil, err
	}
	// Round-trip to catch duplicate names and bad types early.
	if _, err := ParseSchema(ss); err != nil {
		return nil, err
	}
	parts := make([]string, 0, len(co.PartitionColumns))
	seen := map[string]bool{}
	for _, p := range co.PartitionColumns {
		f := co.Schema.Field(p)
		if f == nil {
			return nil, fmt.Errorf("partition column %q is not in the schema", p)
		}
		switch f.Type.(type) {
		case *PrimitiveType, *DecimalType:
		default:
			return nil, fmt.Errorf("partition column %q has type %s; partition columns must be primitive", p, f.Type)
		}
		if seen[strings.ToLower(f.Name)] {
			return nil, fmt.Errorf("partition column %q is listed twice", p)
		}
		seen[strings.ToLower(f.Name)] = true
		parts = append(parts, f.Name)
	}
	if len(parts) == len(co.Schema.Fields) {
		return nil, errors.New("every column is a partition column; at least one data column is needed")
	}
	config := map[string]string{}
	for k, v := range co.Properties {
		config[k] = v
	}
	if err := validateProperties(config); err != nil {
		return nil, err
	}
	newRowTrackingConfig(config)
	if maxID > 0 {
		config[propColumnMappingMaxID] = strconv.FormatInt(maxID, 10)
	}
	created := now.UnixMilli()
	return &Metadata{
		ID:               uuid.NewString(),
		Name:             co.Name,
		Description:      co.Description,
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     ss,
		PartitionColumns: parts,
		Configuration:    config,
		CreatedTime:      &created,
	}, nil
}

// RemoveUnusedCreate removes the table at root when all it holds is the CREATE TABLE
// version 0 that lineage's run and attempt committed: what a first run that failed before
// its first write leaves, an empty table that never held data. It deletes the commit
// first (the table then no longer exists), then whatever else the failed writer left
// below root (data files no commit names). It reports whether it removed the table; any
// other log file (a version 1, a checkpoint) or another creator keeps it. The caller
// must keep other writers of this process from the table meanwhile (its lease).
func RemoveUnusedCreate(ctx context.Context, store objectstore.Store, root string, lineage Lineage) (bool, error) {
	t, err := newTable(store, root, Options{})
	if err != nil {
		return false, err
	}
	files, err := t.store.List(ctx, t.logPrefix(), "")
	if err != nil {
		return false, fmt.Errorf("list %s: %w", t.logPrefix(), err)
	}
	if len(files) != 1 || files[0].Key != t.commitKey(0) {
		return false, nil
	}
	acts, err := t.readCommit(ctx, 0)
	if err != nil {
		return false, err
	}
	for _, a := range acts {
		switch {
		case a.CommitInfo != nil:
			ci := a.CommitInfo
			if l := ci.Orchestrator; ci.Operation != "CREATE TABLE" || l == nil || l.RunID != lineage.RunID ||
				l.Stage != lineage.Stage || l.Attempt != lineage.Attempt {
				return false, nil
			}
		case a.Add != nil, a.Remove != nil, a.CDC != nil, a.Txn != nil:
			return false, nil
		}
	}
	if err := t.store.Delete(ctx, t.commitKey(0)); err != nil {
		return false, fmt.Errorf("remove the empty table %s: %w", t.displayRoot(), err)
	}
	if t.root == "" {
		return true, nil // the store is the table's: nothing else below it is ours to remove
	}
	rest, err := t.store.List(ctx, t.root+"/", "")
	if err != nil {
		return true, nil // the table is gone; what is left is unreferenced
	}
	for _, o := range rest {
		_ = t.store.Delete(ctx, o.Key)
	}
	return true, nil
}
