package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "deltatool:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks a bad command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = "usage: deltatool read|write|create|append|changes|update|delete|merge|restore|vacuum|set-property|alter|checkpoint|history|version|ensure-bucket --table TABLE [flags]"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("deltatool "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", "", "table location: directory, file:///dir or s3://bucket/prefix")
	c, ok := commandFor(cmd, fs)
	if !ok {
		return usageError{fmt.Sprintf("unknown command %q; %s", cmd, usage)}
	}
	if err := fs.Parse(rest); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected arguments %q", cmd, fs.Args())}
	}
	if *table == "" {
		return usageError{cmd + ": --table is required"}
	}
	if c == nil {
		return ensureBucket(ctx, *table)
	}
	store, err := storeurl.Open(ctx, *table, storeurl.Options{})
	if err != nil {
		return err
	}
	return c.run(ctx, &env{store: store, url: *table, stdout: stdout})
}

// commandFor is the command called name, its flags declared on fs; ok is false for an
// unknown name. ensure-bucket is a nil command: it needs no store.
func commandFor(name string, fs *flag.FlagSet) (c command, ok bool) {
	switch name {
	case "read":
		r := &readCmd{}
		fs.StringVar(&r.version, "version", "", "version to read (default latest)")
		fs.StringVar(&r.timestamp, "timestamp", "", "read the version as of this RFC 3339 time")
		fs.StringVar(&r.out, "out", "", "Arrow IPC file to write")
		fs.StringVar(&r.where, "where", "", "only rows where this predicate (expr.Parse) holds; prints the scan's file counts as JSON")
		c = r
	case "write":
		w := &writeCmd{props: map[string]string{}}
		fs.StringVar(&w.in, "in", "", "Arrow IPC file with the records to commit")
		fs.StringVar(&w.mode, "mode", "append", "append or overwrite")
		fs.StringVar(&w.partitionBy, "partition-by", "", "comma-separated partition columns (new tables only)")
		fs.StringVar(&w.clusterBy, "cluster-by", "", "comma-separated clustering columns (new tables only)")
		fs.Var(propFlag(w.props), "property", "table property k=v for a new table (repeatable)")
		fs.Int64Var(&w.rowGroupBytes, "row-group-bytes", 0, "close a row group past this many bytes of Arrow data, checked between the file's record batches (0: default)")
		c = w
	case "create":
		cr := &createCmd{props: map[string]string{}}
		fs.StringVar(&cr.schemaFrom, "schema-from", "", "Arrow IPC file whose schema the table gets")
		fs.StringVar(&cr.partitionBy, "partition-by", "", "comma-separated partition columns")
		fs.StringVar(&cr.identity, "identity", "", "identity column name[:start[:step]] (GENERATED ALWAYS; added as a long in front when the schema lacks it)")
		fs.Var(propFlag(cr.props), "property", "table property k=v (repeatable)")
		c = cr
	case "append":
		a := &appendCmd{}
		fs.StringVar(&a.in, "in", "", "Arrow IPC file with the records to append (delta.Table.Append)")
		c = a
	case "changes":
		ch := &changesCmd{}
		fs.StringVar(&ch.from, "from", "", "first version of the change data feed")
		fs.StringVar(&ch.to, "to", "", "last version (default latest)")
		fs.StringVar(&ch.out, "out", "", "Arrow IPC file to write")
		c = ch
	case "update":
		u := &updateCmd{set: map[string]string{}}
		fs.StringVar(&u.where, "where", "", "predicate (expr.Parse); default every row")
		fs.Var(propFlag(u.set), "set", "col=literal ('text', number, true, false, null; repeatable)")
		c = u
	case "delete":
		d := &deleteCmd{}
		fs.StringVar(&d.where, "where", "", "predicate (expr.Parse)")
		c = d
	case "merge":
		m := &mergeCmd{}
		fs.StringVar(&m.in, "in", "", "Arrow IPC file with the source rows")
		fs.StringVar(&m.on, "on", "", "comma-separated key columns")
		fs.StringVar(&m.deleteWhen, "delete-when", "", "WHEN MATCHED AND this (source.x / target.x) THEN DELETE, before UPDATE SET *")
		fs.BoolVar(&m.byPosition, "by-position", false, "match by position: join here, give the MERGE each match's file, row and target row (as scd2_merge does)")
		c = m
	case "restore":
		r := &restoreCmd{}
		fs.StringVar(&r.version, "version", "", "version to restore")
		c = r
	case "vacuum":
		v := &vacuumCmd{}
		fs.StringVar(&v.retain, "retain", "", "retention (Go duration, e.g. 0s or 168h); default the table's")
		fs.BoolVar(&v.force, "force", false, "allow a retention shorter than "+delta.PropDeletedFileRetentionDur)
		c = v
	case "set-property":
		p := &setPropertyCmd{set: map[string]string{}}
		fs.Var(propFlag(p.set), "property", "property k=v to set (repeatable)")
		fs.Var((*listFlag)(&p.unset), "unset", "property to remove (repeatable)")
		c = p
	case "alter":
		a := &alterCmd{}
		fs.Var((*listFlag)(&a.add), "add", "add a nullable column name:type (repeatable)")
		fs.Var((*listFlag)(&a.widen), "widen", "widen a column to name:type (repeatable)")
		fs.Var((*listFlag)(&a.rename), "rename", "rename a column old:new (repeatable; column mapping)")
		fs.Var((*listFlag)(&a.drop), "drop", "drop a column (repeatable; column mapping)")
		fs.StringVar(&a.mapping, "mapping", "", "turn column mapping on (name)")
		c = a
	case "checkpoint":
		c = checkpointCmd{}
	case "history":
		c = historyCmd{}
	case "version":
		c = versionCmd{}
	case "ensure-bucket":
		c = nil // needs no store: the bucket may not exist yet
	default:
		return nil, false
	}
	return c, true
}

// env is what every command works on: the store whose root is the table root.
type env struct {
	store  objectstore.Store
	url    string
	stdout io.Writer
}

type command interface {
	run(ctx context.Context, e *env) error
}

func (e *env) open(ctx context.Context) (*delta.Table, error) {
	return delta.Open(ctx, e.store, "", delta.Options{})
}

// tableURI is the absolute location scans resolve absolute add paths against.
func (e *env) tableURI() string {
	if strings.Contains(e.url, "://") {
		return strings.TrimSuffix(e.url, "/")
	}
	return ""
}

type readCmd struct{ version, timestamp, out, where string }

func (c *readCmd) run(ctx context.Context, e *env) error {
	if c.out == "" {
		return usageError{"read: --out is required"}
	}
	if c.version != "" && c.timestamp != "" {
		return usageError{"read: give --version or --timestamp, not both"}
	}
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	var snap *delta.Snapshot
	switch {
	case c.version != "":
		v, perr := strconv.ParseInt(c.version, 10, 64)
		if perr != nil {
			return usageError{fmt.Sprintf("read: --version %q: want an integer", c.version)}
		}
		snap, err = t.SnapshotAt(ctx, v)
	case c.timestamp != "":
		ts, perr := time.Parse(time.RFC3339Nano, c.timestamp)
		if perr != nil {
			return usageError{fmt.Sprintf("read: --timestamp %q: want RFC 3339", c.timestamp)}
		}
		snap, err = t.SnapshotAsOf(ctx, ts)
	default:
		snap, err = t.Snapshot(ctx)
	}
	if err != nil {
		return err
	}
	so := delta.ScanOptions{TableURI: e.tableURI()}
	if c.where != "" {
		if so.Filter, err = expr.Parse(c.where); err != nil {
			return usageError{fmt.Sprintf("read: --where %q: %v", c.where, err)}
		}
	}
	sc, err := delta.Scan(ctx, e.store, "", snap.Schema(), snap.PartitionColumns(), snap.Files(), so)
	if err != nil {
		return err
	}
	defer sc.Release()
	if err := writeStream(c.out, sc); err != nil {
		return fmt.Errorf("read version %d: %w", snap.Version(), err)
	}
	if c.where != "" {
		st := sc.Stats()
		return json.NewEncoder(e.stdout).Encode(map[string]int{"filesTotal": st.FilesTotal, "filesPruned": st.FilesPruned, "filesRead": st.FilesRead, "rowGroupsPruned": st.RowGroupsPruned})
	}
	return nil
}

type writeCmd struct {
	in, mode, partitionBy string
	clusterBy             string
	props                 map[string]string
	rowGroupBytes         int64
}

func (c *writeCmd) run(ctx context.Context, e *env) error {
	if c.in == "" {
		return usageError{"write: --in is required"}
	}
	if c.mode != "append" && c.mode != "overwrite" {
		return usageError{fmt.Sprintf("write: --mode %q: want append or overwrite", c.mode)}
	}
	recs, schema, err := readIPC(c.in)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	exists, err := hasLog(ctx, e.store)
	if err != nil {
		return err
	}
	var t *delta.Table
	if exists {
		if c.partitionBy != "" || c.clusterBy != "" || len(c.props) > 0 {
			return usageError{"write: --partition-by, --cluster-by and --property apply to new tables only (use set-property)"}
		}
		if t, err = e.open(ctx); err != nil {
			return err
		}
	} else {
		st, err := delta.SchemaFromArrow(schema)
		if err != nil {
			return err
		}
		var parts []string
		if c.partitionBy != "" {
			parts = strings.Split(c.partitionBy, ",")
		}
		co := delta.CreateOptions{Schema: st, PartitionColumns: parts, Properties: c.props}
		if c.clusterBy != "" {
			co.ClusterBy = strings.Split(c.clusterBy, ",")
		}
		if t, err = delta.Create(ctx, e.store, "", co, delta.Options{}); err != nil {
			return err
		}
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	adds, err := delta.WriteRecords(ctx, e.store, "", snap.Schema(), snap.PartitionColumns(), recs, delta.WriteOptions{RowGroupSize: c.rowGroupBytes})
	if err != nil {
		return err
	}
	var rows, bytes int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for _, a := range adds {
		bytes += a.Size
	}
	partJSON, _ := json.Marshal(nonNil(snap.PartitionColumns()))
	mode := map[string]string{"append": "Append", "overwrite": "Overwrite"}[c.mode]
	metrics := map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": rows, "numOutputBytes": bytes}
	if c.mode == "overwrite" {
		metrics["numRemovedFiles"] = int64(len(snap.Files()))
	}
	tx := t.NewTransaction(snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": mode, "partitionBy": string(partJSON)},
		OperationMetrics:    metrics,
	})
	if c.mode == "overwrite" {
		tx.ReadWholeTable()
		tx.RemoveAdds(snap.Files()...)
	}
	tx.AddFiles(adds...)
	v, err := tx.Commit(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, v)
	return err
}

type setPropertyCmd struct {
	set   map[string]string
	unset []string
}

func (c *setPropertyCmd) run(ctx context.Context, e *env) error {
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	v, err := t.SetProperties(ctx, c.set, c.unset)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, v)
	return err
}

type checkpointCmd struct{}

func (checkpointCmd) run(ctx context.Context, e *env) error {
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := t.Checkpoint(ctx, snap); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, snap.Version())
	return err
}

type versionCmd struct{}

func (versionCmd) run(ctx context.Context, e *env) error {
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, snap.Version())
	return err
}

// historyEntry is the JSON shape of one history row (DESCRIBE HISTORY's column names).
type historyEntry struct {
	Version             int64          `json:"version"`
	Timestamp           string         `json:"timestamp"`
	Operation           string         `json:"operation"`
	OperationParameters map[string]any `json:"operationParameters"`
	OperationMetrics    map[string]any `json:"operationMetrics"`
	ReadVersion         *int64         `json:"readVersion"`
	IsolationLevel      string         `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend"`
	EngineInfo          string         `json:"engineInfo"`
	UserName            string         `json:"userName,omitempty"`
}

type historyCmd struct{}

func (historyCmd) run(ctx context.Context, e *env) error {
	t, err := e.open(ctx)
	if err != nil {
		return err
	}
	hist, err := t.History(ctx, 0)
	if err != nil {
		return err
	}
	out := make([]historyEntry, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- { // oldest first
		h := hist[i]
		out = append(out, historyEntry{
			Version:             h.Version,
			Timestamp:           h.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Operation:           h.Operation,
			OperationParameters: h.OperationParameters,
			OperationMetrics:    h.OperationMetrics,
			ReadVersion:         h.ReadVersion,
			IsolationLevel:      h.IsolationLevel,
			IsBlindAppend:       h.IsBlindAppend,
			EngineInfo:          h.EngineInfo,
			UserName:            h.UserName,
		})
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ensureBucket creates the bucket of an s3:// table URL if it does not exist (the test
// MinIO starts empty).
func ensureBucket(ctx context.Context, table string) error {
	u, err := url.Parse(table)
	if err != nil || (u.Scheme != "s3" && u.Scheme != "s3a") || u.Host == "" {
		return usageError{fmt.Sprintf("ensure-bucket: --table %q: want s3://bucket/prefix", table)}
	}
	cfg, err := s3.ConfigFromEnv()
	if err != nil {
		return err
	}
	cfg.Bucket = u.Host
	st, err := s3.New(cfg)
	if err != nil {
		return err
	}
	return st.EnsureBucket(ctx)
}

// hasLog says whether the store root holds a Delta table.
func hasLog(ctx context.Context, store objectstore.Store) (bool, error) {
	return delta.Exists(ctx, store, "")
}

func readIPC(path string) ([]arrow.RecordBatch, *arrow.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			for _, x := range recs {
				x.Release()
			}
			return nil, nil, fmt.Errorf("read %s: batch %d: %w", path, i, err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	return recs, r.Schema(), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// propFlag collects repeated k=v flags.
type propFlag map[string]string

func (p propFlag) String() string { return "" }

func (p propFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[k] = v
	return nil
}

// listFlag collects repeated string flags.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}
