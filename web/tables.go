package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// tableRef is a table a loaded pipeline declares: the first pipeline (by name) that
// declares the name, and every pipeline that declares it at the same place.
type tableRef struct {
	Name      string
	spec      *pipelines.Spec
	decl      *jobs.Table
	Pipelines []string
}

// catalog lists the declared tables of the loaded pipelines, by name.
func (s *Server) catalog() []*tableRef {
	var out []*tableRef
	byName := map[string]*tableRef{}
	for _, spec := range s.pipelines() {
		for _, t := range spec.Tables {
			if ref := byName[t.Name]; ref != nil {
				if ref.spec.Warehouse == spec.Warehouse && ref.decl.Path == t.Path {
					ref.Pipelines = append(ref.Pipelines, spec.Name)
				}
				continue
			}
			ref := &tableRef{Name: t.Name, spec: spec, decl: t, Pipelines: []string{spec.Name}}
			byName[t.Name] = ref
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lookup finds a declared table by name (of pipeline, when given). Nothing else can be
// opened: the name is compared with declarations, never used as a path.
func (s *Server) lookup(name, pipeline string) (*tableRef, error) {
	if pipeline != "" {
		spec := s.sched.Pipeline(pipeline)
		if spec == nil {
			return nil, notFoundf("no loaded pipeline %q", pipeline)
		}
		if t := spec.Table(name); t != nil {
			return &tableRef{Name: t.Name, spec: spec, decl: t, Pipelines: []string{spec.Name}}, nil
		}
		return nil, notFoundf("pipeline %s declares no table %q", pipeline, name)
	}
	for _, ref := range s.catalog() {
		if ref.Name == name {
			return ref, nil
		}
	}
	return nil, notFoundf("no loaded pipeline declares a table %q", name)
}

// tableCache keeps opened tables, so that a page reads only the commits since the last.
type tableCache struct {
	sched *scheduler.Scheduler
	now   func() time.Time

	mu      sync.Mutex // guards tables and schemas
	tables  map[tableKey]*delta.Table
	schemas map[tableKey]*schemaMemo
}

// schemaMemo is a table's schema history read so far: reading it means reading every
// commit, so later reads read only the commits since.
type schemaMemo struct {
	mu   sync.Mutex // guards upTo and hist
	upTo int64      // the last version read
	hist []delta.SchemaVersion
}

type tableKey struct {
	store objectstore.Store
	path  string
}

func newTableCache(sched *scheduler.Scheduler, now func() time.Time) *tableCache {
	return &tableCache{sched: sched, now: now, tables: map[tableKey]*delta.Table{}, schemas: map[tableKey]*schemaMemo{}}
}

// quietLog drops delta's warnings about tables read by the pages.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens a declared table; ok is false when it does not exist yet.
func (c *tableCache) open(ctx context.Context, ref *tableRef) (*delta.Table, bool, error) {
	st := c.sched.StoreOf(ref.spec.Name)
	if st == nil {
		return nil, false, notFoundf("pipeline %s is no longer loaded", ref.spec.Name)
	}
	wh := st.Objects()
	k := tableKey{wh, ref.decl.Path}
	c.mu.Lock()
	t := c.tables[k]
	c.mu.Unlock()
	if t != nil {
		return t, true, nil
	}
	ok, err := delta.Exists(ctx, wh, ref.decl.Path)
	if err != nil || !ok {
		return nil, false, err
	}
	t, err = delta.Open(ctx, wh, ref.decl.Path, delta.Options{Now: c.now, Logger: quietLog})
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	c.tables[k] = t
	c.mu.Unlock()
	return t, true, nil
}

// schemaHistory is the schema history of table t (opened for ref) up to version latest:
// what earlier calls read, and the commits after it.
func (c *tableCache) schemaHistory(ctx context.Context, ref *tableRef, t *delta.Table, latest int64) ([]delta.SchemaVersion, error) {
	k := tableKey{t.Store(), ref.decl.Path}
	c.mu.Lock()
	m := c.schemas[k]
	if m == nil {
		m = &schemaMemo{}
		c.schemas[k] = m
	}
	c.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.hist != nil && latest <= m.upTo:
	case m.hist != nil:
		more, err := t.SchemaHistoryBetween(ctx, m.upTo, latest)
		if err == nil {
			m.hist, m.upTo = append(m.hist, more[1:]...), latest
			break
		}
		m.hist = nil // the log no longer holds the version read up to: read it all again
		fallthrough
	default:
		hist, err := t.SchemaHistoryBetween(ctx, -1, latest)
		if err != nil {
			return nil, err
		}
		m.hist, m.upTo = hist, latest
	}
	var out []delta.SchemaVersion
	for _, h := range m.hist {
		if h.Version <= latest {
			out = append(out, h)
		}
	}
	return out, nil
}

// mustOpen opens a declared table that must exist.
func (s *Server) mustOpen(ctx context.Context, ref *tableRef) (*delta.Table, error) {
	t, ok, err := s.tables.open(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFoundf("table %s does not exist yet: a run of %s creates it", ref.Name, strings.Join(ref.Pipelines, " or "))
	}
	return t, nil
}

// tableURI is where a declared table lives, as an absolute URI (for logs that name
// files by absolute URI).
func tableURI(ref *tableRef) string {
	return storeurl.URI(storeurl.Join(ref.spec.Warehouse, ref.decl.Path))
}

// tableInfo is what the table page's overview and GET /api/v1/tables/{name} show.
type tableInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Path        string   `json:"path"`
	Pipelines   []string `json:"pipelines"`
	Exists      bool     `json:"exists"`
	// Of the current version:
	Version          int64             `json:"version"`
	Timestamp        time.Time         `json:"timestamp,omitzero"`
	Files            int               `json:"files"`
	SizeBytes        int64             `json:"size_bytes"`
	Records          *int64            `json:"records,omitempty"`
	Schema           []columnView      `json:"schema"`
	PartitionColumns []string          `json:"partition_columns"`
	Properties       map[string]string `json:"properties"`
	ChangeDataFeed   bool              `json:"change_data_feed"`
	// Keys identify a row for a diff (pipelines.Spec.TableKeys).
	Keys      []string       `json:"keys"`
	Writers   []string       `json:"writers"`
	Horizons  *horizonsView  `json:"horizons,omitempty"`
	Consumers []consumerView `json:"consumers"`
	// Freshness is the table's freshness watch, when a pipeline declares one.
	Freshness *watchView `json:"freshness,omitempty"`
}

type columnView struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Nullable  bool   `json:"nullable"`
	Identity  string `json:"identity,omitempty"` // "start 1, step 1"
	Partition bool   `json:"partition,omitempty"`
}

type horizonsView struct {
	Earliest             int64     `json:"earliest_version"`
	Latest               int64     `json:"latest_version"`
	DeletedFileRetention string    `json:"deleted_file_retention"`
	VacuumCutoff         time.Time `json:"vacuum_cutoff"`
	VacuumVersion        int64     `json:"vacuum_version"`
	LogRetention         string    `json:"log_retention"`
	LogCutoff            time.Time `json:"log_cutoff"`
	LogVersion           int64     `json:"log_version"`
}

// consumerView is a change feed reader of the table and where it stands.
type consumerView struct {
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Kind     string `json:"kind"`
	Target   string `json:"target"`
	// NextVersion is the first version its next run reads; Behind how many versions of
	// the table it has yet to read.
	NextVersion int64 `json:"next_version"`
	Behind      int64 `json:"behind"`
	// AtRisk says what a vacuum or log cleanup run now by anyone that does not know of
	// the consumer (another engine, a forced vacuum) would break ("" when nothing).
	AtRisk string `json:"at_risk,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *Server) tableInfo(ctx context.Context, ref *tableRef) (*tableInfo, error) {
	ti := &tableInfo{Name: ref.Name, Description: ref.decl.Description, Path: ref.decl.Path, Pipelines: ref.Pipelines,
		Keys: ref.spec.TableKeys(ref.Name), PartitionColumns: []string{}, Properties: map[string]string{}, Consumers: []consumerView{}, Schema: []columnView{}}
	for _, st := range ref.spec.Stages {
		if _, writes := st.Config.Tables(); slices.Contains(writes, ref.Name) {
			ti.Writers = append(ti.Writers, st.Name)
		}
	}
	for _, w := range s.sched.Watches("") {
		if w.Kind == scheduler.WatchFreshness && w.Table == ref.Name && slices.Contains(ref.Pipelines, w.Pipeline) {
			ti.Freshness = viewOfWatch(w)
			break
		}
	}
	t, ok, err := s.tables.open(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		for _, f := range ref.decl.Schema.Fields {
			ti.Schema = append(ti.Schema, columnOf(f, ref.decl.PartitionBy))
		}
		ti.PartitionColumns = append(ti.PartitionColumns, ref.decl.PartitionBy...)
		for k, v := range ref.decl.Properties {
			ti.Properties[k] = v
		}
		return ti, nil
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	ti.Exists, ti.Version, ti.Timestamp = true, snap.Version(), snap.Timestamp()
	for _, f := range snap.Files() {
		ti.Files++
		ti.SizeBytes += f.Size
	}
	if n, ok := snap.NumRecords(); ok {
		ti.Records = &n
	}
	for _, f := range snap.Schema().Fields {
		ti.Schema = append(ti.Schema, columnOf(f, snap.PartitionColumns()))
	}
	ti.PartitionColumns = append(ti.PartitionColumns, snap.PartitionColumns()...)
	ti.Properties = snap.Properties()
	ti.ChangeDataFeed = snap.ChangeDataFeedEnabled()
	h, err := t.Horizons(ctx)
	if err != nil {
		return nil, err
	}
	ti.Horizons = &horizonsView{Earliest: h.Earliest, Latest: h.Latest,
		DeletedFileRetention: durationText(h.DeletedFileRetention), VacuumCutoff: h.VacuumCutoff, VacuumVersion: h.VacuumVersion,
		LogRetention: durationText(h.LogRetention), LogCutoff: h.LogCutoff, LogVersion: h.LogVersion}
	ti.Consumers = s.consumers(ctx, ref, t, h)
	return ti, nil
}

// WhereHint is an example predicate over the table's own columns, for the Where field:
// a key (or the first string column) equal to a value, and a number or time column
// compared, e.g. "customer_id = 'C-1' AND amount >= 10".
func (ti *tableInfo) WhereHint() string {
	var str, num, ts string
	pick := func(c columnView) {
		t := strings.ToLower(c.Type)
		switch {
		case str == "" && t == "string":
			str = fmt.Sprintf("%s = '…'", c.Name)
		case num == "" && c.Identity == "" && (t == "integer" || t == "long" || t == "short" || t == "double" || t == "float" || strings.HasPrefix(t, "decimal")):
			num = c.Name + " >= 10"
		case ts == "" && (t == "timestamp" || t == "timestamp_ntz" || t == "date"):
			ts = c.Name + " >= '2026-01-01'"
		}
	}
	for _, k := range ti.Keys {
		for _, c := range ti.Schema {
			if c.Name == k {
				pick(c)
			}
		}
	}
	for _, c := range ti.Schema {
		if !strings.HasPrefix(c.Name, "_") {
			pick(c)
		}
	}
	var terms []string
	for _, t := range []string{str, num, ts} {
		if t != "" && len(terms) < 2 {
			terms = append(terms, t)
		}
	}
	return strings.Join(terms, " AND ")
}

func columnOf(f *delta.StructField, partitions []string) columnView {
	c := columnView{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable,
		Partition: slices.ContainsFunc(partitions, func(p string) bool { return strings.EqualFold(p, f.Name) })}
	if id, ok, err := delta.IdentityField(f); err == nil && ok {
		c.Identity = fmt.Sprintf("start %d, step %d", id.Start, id.Step)
	}
	return c
}

// consumers are the change feed readers of the table in every loaded pipeline, with
// what a vacuum or log cleanup run now would do to them.
func (s *Server) consumers(ctx context.Context, ref *tableRef, t *delta.Table, h *delta.Horizons) []consumerView {
	out := []consumerView{}
	st := s.sched.StoreOf(ref.spec.Name)
	for _, spec := range s.pipelines() {
		if spec.Warehouse != ref.spec.Warehouse {
			continue
		}
		for _, c := range spec.Consumers() {
			if c.Source.Path != ref.decl.Path {
				continue
			}
			cv := consumerView{Pipeline: c.Pipeline, Stage: c.Stage, Target: c.History.Name}
			if stg := spec.Stage(c.Stage); stg != nil {
				cv.Kind = string(stg.Kind)
			}
			next, err := c.NextVersion(ctx, st.Objects(), t, delta.Options{Now: s.cfg.Now, Logger: quietLog})
			if err != nil {
				cv.Error = err.Error()
				out = append(out, cv)
				continue
			}
			cv.NextVersion, cv.Behind = next, max(h.Latest+1-next, 0)
			cv.AtRisk = atRisk(c, next, h)
			out = append(out, cv)
		}
	}
	return out
}

// atRisk says what a vacuum or log cleanup would do to a reader whose next run starts
// at version next ("": nothing).
func atRisk(c jobs.Consumer, next int64, h *delta.Horizons) string {
	switch {
	case c.Snapshot:
		// A fact_load of a snapshot source opens the version it last loaded too;
		// without it, or the feed since, it reads the whole snapshot: slower.
		switch {
		case next <= h.Latest && next-1 < h.Earliest:
			return fmt.Sprintf("slower: version %d, which it last loaded, is no longer in the log (it starts at %d): its next run reads the whole snapshot", next-1, h.Earliest)
		case next <= h.Latest && next-1 < h.LogVersion:
			return fmt.Sprintf("a log cleanup now (after the next checkpoint) would remove versions %d to %d: its next run would read the whole snapshot", next-1, h.LogVersion-1)
		case next <= h.Latest && next < h.VacuumVersion:
			return fmt.Sprintf("a vacuum now by another engine, or forced, would delete the changes of versions %d to %d: its next run would read the whole snapshot (orchestrator's vacuums keep them for it)", next, min(h.VacuumVersion-1, h.Latest))
		}
	case next <= h.Latest && next < h.Earliest:
		return fmt.Sprintf("broken: it has yet to read version %d, which is no longer in the log (it starts at %d)", next, h.Earliest)
	case next <= h.Latest && next < h.LogVersion:
		return fmt.Sprintf("a log cleanup now (after the next checkpoint) would remove versions %d to %d, which it has yet to read", next, h.LogVersion-1)
	case next <= h.Latest && next < h.VacuumVersion:
		return fmt.Sprintf("a vacuum now by another engine, or forced, would delete the changes of versions %d to %d, which it has yet to read (orchestrator's vacuums keep them for it)", next, min(h.VacuumVersion-1, h.Latest))
	}
	return ""
}

// durationText renders a retention as Delta writes intervals: "7 days", "36 hours".
func durationText(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		n := int64(d / (24 * time.Hour))
		if n == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", n)
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", int64(d/time.Hour))
	}
	return d.String()
}

// Description is the table's declared description.
func (r *tableRef) Description() string { return r.decl.Description }
