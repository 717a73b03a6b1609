package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/sparkconnect"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// SparkConfig names a Spark cluster and how it sees the warehouse.
type SparkConfig struct {
	// Remote is the Spark Connect address, sc://host:15002[/;token=...].
	Remote string
	// Conf are session confs set at the start of every attempt (e.g. S3 credentials).
	Conf map[string]string
	// Warehouse is the warehouse root as Spark reads it: an absolute local path (a
	// cluster on this machine or a shared file system), or s3a://bucket/prefix.
	Warehouse string
	// Locate turns an ingest file's location, as the pipeline writes it, into a path
	// Spark reads.
	Locate func(location string) (string, error)
}

// SparkExecutor carries out stage plans as Delta SQL over Spark Connect: one session
// per attempt, one statement per commit, each with the stage's txn set in the session
// (spark.databricks.delta.write.txnAppId / txnVersion) so its progress commits with its
// data, as the local stage's does.
type SparkExecutor struct {
	*tasks
	cfg    SparkConfig
	client *sparkconnect.Client
}

var _ Executor = (*SparkExecutor)(nil)

// NewSpark returns an executor for the cluster (connected lazily).
func NewSpark(cfg SparkConfig) (*SparkExecutor, error) {
	if cfg.Warehouse == "" {
		return nil, errors.New("spark executor: the warehouse as Spark sees it is not set")
	}
	c, err := sparkconnect.Dial(cfg.Remote)
	if err != nil {
		return nil, err
	}
	e := &SparkExecutor{cfg: cfg, client: c}
	e.tasks = newTasks(Spark, e.run)
	return e, nil
}

// Client returns the executor's Connect client.
func (e *SparkExecutor) Client() *sparkconnect.Client { return e.client }

// Close implements Executor: it cancels running tasks (interrupting their operations)
// and closes the connection.
func (e *SparkExecutor) Close() error {
	e.tasks.Close()
	return e.client.Close()
}

// Confs the engine sets itself.
const (
	confTxnAppID   = delta.SparkConfTxnAppID
	confTxnVersion = delta.SparkConfTxnVersion
	confMetadata   = delta.SparkConfUserMetadata
	confRetention  = delta.SparkConfRetentionDurationChk
	confTimeZone   = "spark.sql.session.timeZone"
)

// statement is one SQL statement of a plan and the commit it makes.
type statement struct {
	// setup runs first, committing nothing (temporary views).
	setup []string
	sql   string
	table jobs.PlanTable // the table it commits to
	txn   *jobs.PlanTxn  // the progress committed with it (nil: none)
	conf  map[string]string
	note  string
	// about names what the statement reads (an ingest's file), for its errors.
	about string
}

// run carries out one attempt: plan, then the plan's statements in one session.
func (e *SparkExecutor) run(ctx context.Context, t Task, log func(string, ...any)) (jobs.Result, error) {
	start := time.Now()
	res, err := e.attempt(ctx, t, log)
	res.Duration = time.Since(start)
	res.Engine = string(Spark)
	if err != nil {
		return res, fmt.Errorf("%s %s on spark: %w", t.Stage.Kind(), t.Stage.Name(), err)
	}
	return res, nil
}

func (e *SparkExecutor) attempt(ctx context.Context, t Task, log func(string, ...any)) (jobs.Result, error) {
	pl, ok := t.Stage.(jobs.Planner)
	if !ok {
		return jobs.Result{}, fmt.Errorf("stage kind %s cannot run on spark", t.Stage.Kind())
	}
	p, err := pl.Plan(ctx, t.Env)
	if err != nil {
		return jobs.Result{}, err
	}
	if p.UpToDate {
		return p.Result, nil
	}
	if err := checkFeedRanges(ctx, p, t.Env); err != nil {
		return p.Result, err
	}
	stmts, err := e.statements(p, t.Env)
	res := p.Result // with the notes the statements added
	if err != nil {
		return res, err
	}
	if len(stmts) == 0 {
		return res, nil
	}
	s := e.client.NewSession()
	log("spark session %s at %s", s.ID(), sparkconnect.Redact(e.cfg.Remote))
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.Release(rctx); err != nil {
			log("release session %s: %v", s.ID(), err)
		}
	}()
	conf := map[string]string{confTimeZone: "UTC"}
	for k, v := range e.cfg.Conf {
		conf[k] = v
	}
	meta, _ := json.Marshal(map[string]any{"orchestrator": t.Env.Lineage})
	conf[confMetadata] = string(meta)
	if err := s.SetConf(ctx, conf); err != nil {
		return res, err
	}
	for _, st := range stmts {
		op, err := e.execute(ctx, s, t, st, log)
		if op != nil {
			res.Operations = append(res.Operations, *op)
			if op.Version >= 0 {
				res.VersionsWritten = append(res.VersionsWritten, jobs.TableVersion{Table: st.table.Name, Version: op.Version})
				res.RowsWritten += rowsWritten(op.Metrics)
				res.FilesWritten += metric(op.Metrics, "numFiles", "numTargetFilesAdded")
				res.BytesWritten += metric(op.Metrics, "numOutputBytes", "numTargetBytesAdded")
				res.FilesDeleted += metric(op.Metrics, "numDeletedFiles")
			}
		}
		if err != nil {
			return res, err
		}
		if st.note != "" {
			res.Notes = append(res.Notes, st.note)
		}
	}
	return res, nil
}

// execute runs one statement with its txn and returns what it did.
func (e *SparkExecutor) execute(ctx context.Context, s *sparkconnect.Session, t Task, st statement, log func(string, ...any)) (*jobs.Operation, error) {
	conf := map[string]string{}
	for k, v := range st.conf {
		conf[k] = v
	}
	if st.txn != nil {
		conf[confTxnAppID], conf[confTxnVersion] = st.txn.AppID, strconv.FormatInt(st.txn.Version, 10)
	}
	if len(conf) > 0 {
		if err := s.SetConf(ctx, conf); err != nil {
			return nil, err
		}
	}
	for _, q := range st.setup {
		opID := sparkconnect.NewOperationID()
		log("operation %s: %s", opID, q)
		if _, err := s.Execute(ctx, opID, q); err != nil {
			if st.about != "" {
				return nil, fmt.Errorf("%s: spark operation %s: %w", st.about, opID, err)
			}
			return nil, fmt.Errorf("spark operation %s: %w", opID, err)
		}
	}
	before, err := tableVersion(ctx, t.Env, st.table)
	if err != nil {
		return nil, err
	}
	opID := sparkconnect.NewOperationID()
	if t.OnOperation != nil {
		t.OnOperation(s.ID(), opID)
	}
	log("operation %s: %s", opID, st.sql)
	op := &jobs.Operation{SQL: st.sql, SessionID: s.ID(), OperationID: opID, Table: st.table.Name, Version: -1}
	_, execErr := s.Execute(ctx, opID, st.sql)
	if len(conf) > 0 {
		keys := make([]string, 0, len(conf))
		for k := range conf {
			keys = append(keys, k)
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.UnsetConf(uctx, keys...); err != nil && execErr == nil {
			execErr = err
		}
	}
	// What committed, also after an error (an interrupt may come after the commit).
	after, err := committed(context.WithoutCancel(ctx), t.Env, st.table, before)
	if err == nil && after != nil {
		op.Version = after.Version
		op.Metrics = map[string]string{}
		for k, v := range after.OperationMetrics {
			op.Metrics[k] = fmt.Sprint(v)
		}
		log("operation %s committed %s version %d (%s)", opID, st.table.Name, after.Version, after.Operation)
	} else if execErr == nil {
		log("operation %s committed nothing", opID)
	}
	if execErr != nil {
		if st.about != "" {
			return op, fmt.Errorf("%s: spark operation %s: %w", st.about, opID, execErr)
		}
		return op, fmt.Errorf("spark operation %s: %w", opID, execErr)
	}
	return op, err
}

// checkFeedRanges refuses, with its reason, a plan whose SQL reads a change feed across a
// column renamed, dropped or widened in its range: Spark's table_changes refuses such a
// range (DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE or _DATA_SCHEMA), while the local engine reads
// it exactly, matching columns by their ids and widening older files.
func checkFeedRanges(ctx context.Context, p *jobs.Plan, env *jobs.Env) error {
	type feed struct {
		src         jobs.PlanTable
		from, until int64
	}
	var feeds []feed
	switch {
	case p.Capture != nil:
		feeds = append(feeds, feed{p.Capture.Source, p.Capture.From, p.Capture.Through})
	case p.Merge != nil && p.Merge.SourceChanges:
		from := p.Merge.From
		if p.Merge.PriorFrom >= 0 && p.Merge.PriorFrom < from {
			from = p.Merge.PriorFrom
		}
		feeds = append(feeds, feed{p.Merge.Source, from, p.Merge.Through})
	}
	for _, f := range feeds {
		tbl, err := delta.Open(ctx, env.Warehouse, f.src.Path, env.Delta)
		if err != nil {
			return fmt.Errorf("table %s: %w", f.src.Name, err)
		}
		versions, err := tbl.NonAdditiveChanges(ctx, f.from, f.until)
		if err != nil {
			return fmt.Errorf("table %s: %w", f.src.Name, err)
		}
		if len(versions) > 0 {
			var what []string
			for _, sv := range versions {
				for _, c := range sv.Changes {
					what = append(what, fmt.Sprintf("%s at version %d", c, sv.Version))
				}
			}
			return fmt.Errorf("the change feed of %s versions %d..%d crosses %s, which Spark's table_changes cannot read across; run this stage with engine: local (it reads such a feed exactly)",
				f.src.Name, f.from, f.until, strings.Join(what, ", "))
		}
	}
	return nil
}

// tableVersion is a table's latest version (-1 when it does not exist).
func tableVersion(ctx context.Context, env *jobs.Env, pt jobs.PlanTable) (int64, error) {
	ok, err := delta.Exists(ctx, env.Warehouse, pt.Path)
	if err != nil || !ok {
		return -1, err
	}
	tbl, err := delta.Open(ctx, env.Warehouse, pt.Path, env.Delta)
	if err != nil {
		return -1, fmt.Errorf("table %s: %w", pt.Name, err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return -1, fmt.Errorf("table %s: %w", pt.Name, err)
	}
	return snap.Version(), nil
}

// committed returns the newest commit after version before (nil: none), read from the
// table's log; the lease keeps other orchestrator stages from committing meanwhile.
func committed(ctx context.Context, env *jobs.Env, pt jobs.PlanTable, before int64) (*delta.HistoryEntry, error) {
	tbl, err := delta.Open(ctx, env.Warehouse, pt.Path, env.Delta)
	if err != nil {
		return nil, err
	}
	hist, err := tbl.History(ctx, 1)
	if err != nil || len(hist) == 0 || hist[0].Version <= before {
		return nil, err
	}
	return &hist[0], nil
}

// metric reads the first of the named operation metrics that is there.
func metric(m map[string]string, names ...string) int64 {
	for _, n := range names {
		if v, ok := m[n]; ok {
			i, _ := strconv.ParseInt(v, 10, 64)
			return i
		}
	}
	return 0
}

// rowsWritten counts the rows a commit wrote, as the local stages count them.
func rowsWritten(m map[string]string) int64 {
	if _, ok := m["numTargetRowsInserted"]; ok {
		return metric(m, "numTargetRowsInserted") + metric(m, "numTargetRowsUpdated") + metric(m, "numTargetRowsDeleted")
	}
	return metric(m, "numOutputRows")
}

// statements turns a plan into SQL.
func (e *SparkExecutor) statements(p *jobs.Plan, env *jobs.Env) ([]statement, error) {
	switch {
	case p.Capture != nil:
		return e.captureSQL(p)
	case p.Merge != nil && p.Kind == jobs.KindSCD2Merge:
		return e.scd2SQL(p)
	case p.Merge != nil:
		return e.scd1SQL(p)
	case p.Vacuum != nil:
		return e.vacuumSQL(p, env)
	case p.Ingest != nil:
		return e.ingestSQL(p)
	}
	return nil, nil
}

// path is a table's location as Spark reads it.
func (e *SparkExecutor) path(pt jobs.PlanTable) string {
	return strings.TrimSuffix(e.cfg.Warehouse, "/") + "/" + strings.Trim(pt.Path, "/")
}

// tableRef is a Delta table by path in Spark SQL: the data source name as a quoted
// identifier, then the path (delta.`/path` in Spark's docs).
func (e *SparkExecutor) tableRef(pt jobs.PlanTable) string { return "`delta`.`" + e.path(pt) + "`" }

// ident quotes a column name.
func ident(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// str quotes a string literal.
func str(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func idents(names []string, prefix string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + ident(n)
	}
	return strings.Join(out, ", ")
}

// tsLiteral is a timestamp literal in UTC with microseconds.
func tsLiteral(t time.Time) string {
	return "TIMESTAMP '" + t.UTC().Format("2006-01-02 15:04:05.000000") + "'"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
