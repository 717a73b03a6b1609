package lineage

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// RunInfo is what an event says of a pipeline run.
type RunInfo struct {
	ID      string // the run's id (pipeline@slot...)
	Attempt int
	Slot    time.Time // its nominal time
	Error   string    // why it failed (FAIL, ABORT)
}

// TableVersion is a version of a declared table.
type TableVersion struct {
	Table   string
	Version int64
}

// StageInfo is what an event says of a stage of a run.
type StageInfo struct {
	Name    string
	Read    []TableVersion // versions read (change feed reads: the last version read)
	Written []TableVersion
	Error   string
	// Checks are the results of the stage's expectations (quality.go).
	Checks []Check
}

// Builder makes the events of one pipeline's runs; it reads schemas and commit
// statistics of the tables from the warehouse.
type Builder struct {
	spec      *pipelines.Spec
	namespace string
	wh        objectstore.Store
	whScheme  string // file, s3 or mem
	whAuth    string
	whPath    string
}

// NewBuilder returns the Builder of spec's events, whose tables are in wh.
func NewBuilder(spec *pipelines.Spec, wh objectstore.Store) (*Builder, error) {
	scheme, auth, p, err := storeurl.Parts(spec.Warehouse)
	if err != nil {
		return nil, err
	}
	ns := spec.Lineage.Namespace
	if ns == "" {
		ns = pipelines.DefaultLineageNamespace
	}
	return &Builder{spec: spec, namespace: ns, wh: wh, whScheme: scheme, whAuth: auth, whPath: p}, nil
}

// TableDataset returns the namespace and name of a declared table, as OpenLineage's
// naming spec names a directory or an S3 prefix.
func (b *Builder) TableDataset(table string) (namespace, name string) {
	rel := table
	if t := b.spec.Table(table); t != nil {
		rel = t.Path
	}
	switch b.whScheme {
	case "file":
		return "file", path.Join(b.whPath, rel)
	case "s3":
		return "s3://" + b.whAuth, strings.TrimPrefix(path.Join(b.whPath, rel), "/")
	}
	return "mem://" + b.whAuth, strings.TrimPrefix(path.Join(b.whPath, rel), "/")
}

// sourceDataset names an ingest's source files.
func (b *Builder) sourceDataset(source string) (string, string) {
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") {
		return sourceDataset(source)
	}
	scheme, auth, p, err := storeurl.Parts(source)
	if err != nil {
		return "file", globDir(source)
	}
	switch scheme {
	case "file":
		return "file", globDir(p)
	case "s3":
		return "s3://" + auth, globDir(p)
	}
	return "mem://" + auth, globDir(p)
}

// RunEvent is the event of a pipeline run's transition at time at.
func (b *Builder) RunEvent(typ EventType, run RunInfo, at time.Time) Event {
	ev := b.event(typ, at, RunUUID(run.ID, run.Attempt, ""), b.spec.Name, "DAG")
	if !run.Slot.IsZero() {
		ev.Run.Facets["nominalTime"] = nominalTimeFacet{facet: base(nominalTimeFacetURL), NominalStartTime: eventTime(run.Slot)}
	}
	if b.spec.Description != "" {
		ev.Job.Facets["documentation"] = documentationFacet{facet: base(documentationURL), Description: b.spec.Description}
	}
	if run.Error != "" && typ != Start && typ != Complete {
		ev.Run.Facets["errorMessage"] = errorMessageFacet{facet: base(errorMessageFacetURL), Message: run.Error, ProgrammingLanguage: "Go"}
	}
	return ev
}

func (b *Builder) event(typ EventType, at time.Time, runID, job, jobType string) Event {
	return Event{
		EventType: typ, EventTime: eventTime(at), Producer: Producer, SchemaURL: RunEventSchemaURL,
		Run:    Run{RunID: runID, Facets: map[string]any{}},
		Job:    Job{Namespace: b.namespace, Name: job, Facets: map[string]any{"jobType": jobTypeFacet{facet: base(jobTypeFacetURL), ProcessingType: "BATCH", Integration: "ORCHESTRATOR", JobType: jobType}}},
		Inputs: []Dataset{}, Outputs: []Dataset{},
	}
}

// StageEvent is the event of a stage's transition at time at: its inputs and outputs
// (the tables its kind reads and writes; with the versions it read and committed, their
// schema, column lineage and output statistics read from the tables at those versions).
func (b *Builder) StageEvent(ctx context.Context, typ EventType, run RunInfo, st StageInfo, at time.Time) Event {
	parent := RunUUID(run.ID, run.Attempt, "")
	ev := b.event(typ, at, RunUUID(run.ID, run.Attempt, st.Name), b.spec.Name+"."+st.Name, "TASK")
	ref := parentRef{Run: parentRun{RunID: parent}, Job: parentJob{Namespace: b.namespace, Name: b.spec.Name}}
	ev.Run.Facets["parent"] = parentFacet{facet: base(parentFacetURL), Run: ref.Run, Job: ref.Job, Root: &ref}
	if !run.Slot.IsZero() {
		ev.Run.Facets["nominalTime"] = nominalTimeFacet{facet: base(nominalTimeFacetURL), NominalStartTime: eventTime(run.Slot)}
	}
	if st.Error != "" && (typ == Fail || typ == Abort) {
		ev.Run.Facets["errorMessage"] = errorMessageFacet{facet: base(errorMessageFacetURL), Message: st.Error, ProgrammingLanguage: "Go"}
	}
	stage := b.spec.Stage(st.Name)
	if stage == nil || stage.Config == nil {
		return ev
	}
	reads, writes := stage.Config.Tables()
	version := func(list []TableVersion, table string) (int64, bool) {
		v, ok := int64(-1), false
		for _, tv := range list {
			if tv.Table == table && tv.Version > v {
				v, ok = tv.Version, true
			}
		}
		return v, ok
	}
	if ic, ok := stage.Config.(*jobs.IngestConfig); ok && ic.Source != "" {
		ns, name := b.sourceDataset(ic.Source)
		ev.Inputs = append(ev.Inputs, Dataset{Namespace: ns, Name: name, Facets: map[string]any{}})
	}
	for _, t := range reads {
		v, ok := version(st.Read, t)
		ev.Inputs = append(ev.Inputs, b.tableDataset(ctx, t, v, ok))
	}
	var judged []Dataset
	for _, t := range writes {
		v, ok := version(st.Written, t)
		d := b.tableDataset(ctx, t, v, ok)
		if cl := b.columnLineage(stage, t, ev.Inputs); cl != nil {
			d.Facets["columnLineage"] = cl
		}
		if q, checked := qualityFacet(stage, t, st.Checks); checked && (typ == Complete || typ == Fail) {
			// The spec's facet is an input facet: the checks read the table the stage
			// wrote, so it is an input too, at the version they judged.
			in := b.tableDataset(ctx, t, v, ok)
			in.InputFacets = map[string]any{"dataQualityAssertions": q}
			judged = append(judged, in)
		}
		if ok && typ == Complete {
			if os, ok := b.outputStatistics(ctx, t, st.Written); ok {
				d.OutputFacets = map[string]any{"outputStatistics": os}
			}
		}
		ev.Outputs = append(ev.Outputs, d)
	}
	for _, in := range judged {
		if i := slices.IndexFunc(ev.Inputs, func(x Dataset) bool { return x.Namespace == in.Namespace && x.Name == in.Name }); i >= 0 {
			ev.Inputs[i].InputFacets = in.InputFacets // (a stage that read it before)
			continue
		}
		ev.Inputs = append(ev.Inputs, in)
	}
	return ev
}

// outputStatistics sums what the commits a stage made to a table added: rows, bytes
// and files.
func (b *Builder) outputStatistics(ctx context.Context, table string, written []TableVersion) (outputStatistics, bool) {
	os := outputStatistics{facet: base(outputStatisticsURL)}
	decl := b.spec.Table(table)
	if decl == nil {
		return os, false
	}
	var rows int64
	known := true
	for _, tv := range written {
		if tv.Table != table {
			continue
		}
		cs, err := delta.CommitOutput(ctx, b.wh, decl.Path, tv.Version)
		if err != nil {
			return os, false
		}
		os.Size += cs.Bytes
		os.FileCount += cs.Files
		rows += cs.Rows
		known = known && cs.RowsKnown
	}
	if known {
		os.RowCount = &rows
	}
	return os, true
}

// tableDataset is a declared table as a dataset: with its version facet and its schema
// at that version when known, else its declared schema.
func (b *Builder) tableDataset(ctx context.Context, table string, version int64, known bool) Dataset {
	ns, name := b.TableDataset(table)
	d := Dataset{Namespace: ns, Name: name, Facets: map[string]any{}}
	decl := b.spec.Table(table)
	var schema *delta.StructType
	if decl != nil {
		schema = decl.Schema
	}
	if known {
		d.Facets["version"] = versionFacet{facet: base(versionFacetURL), DatasetVersion: strconv.FormatInt(version, 10)}
		if decl != nil {
			if s, err := delta.SchemaAt(ctx, b.wh, decl.Path, version); err == nil {
				schema = s
			}
		}
	}
	if schema != nil {
		sf := schemaFacet{facet: base(schemaFacetURL), Fields: []schemaField{}}
		for _, f := range schema.Fields {
			field := schemaField{Name: f.Name, Type: f.Type.String()}
			if c, ok := f.Metadata["comment"].(string); ok {
				field.Description = c
			}
			sf.Fields = append(sf.Fields, field)
		}
		d.Facets["schema"] = sf
	}
	return d
}

// columnLineage says where the columns of a stage's output come from, where its kind
// tells it; nil when it does not.
func (b *Builder) columnLineage(stage *pipelines.Stage, target string, inputs []Dataset) any {
	decl := b.spec.Table(target)
	if decl == nil || decl.Schema == nil || len(inputs) == 0 {
		return nil
	}
	identity := []Transformation{{Type: "DIRECT", Subtype: "IDENTITY"}}
	src := inputs[0]
	fields := map[string]columnFields{}
	from := func(out, in string, tr []Transformation) {
		fields[out] = columnFields{InputFields: []InputField{{Namespace: src.Namespace, Name: src.Name, Field: in, Transformations: tr}}}
	}
	sourceCols := func(table string) []string {
		var cols []string
		if t := b.spec.Table(table); t != nil && t.Schema != nil {
			for _, f := range t.Schema.Fields {
				cols = append(cols, f.Name)
			}
		}
		return cols
	}
	switch c := stage.Config.(type) {
	case *jobs.IngestConfig:
		skip := []string{or(c.SourceFileColumn, "source_file"), or(c.LoadTimestampColumn, "load_timestamp")}
		for _, f := range decl.Schema.Fields {
			if !slices.Contains(skip, f.Name) && !delta.IsIdentity(f) {
				from(f.Name, f.Name, identity)
			}
		}
	case *jobs.CaptureHistoryConfig:
		in := sourceCols(c.Source)
		for _, f := range decl.Schema.Fields {
			if slices.Contains(in, f.Name) {
				from(f.Name, f.Name, identity)
			}
		}
	case *jobs.SCD2Config:
		in := sourceCols(c.Source)
		cols := c.Columns.WithDefaults()
		vf, vt := cols.ValidFrom, cols.ValidTo
		for _, f := range decl.Schema.Fields {
			switch {
			case f.Name == cols.SurrogateKey || f.Name == cols.IsCurrent || f.Name == cols.Inferred:
			case (f.Name == vf || f.Name == vt) && c.SequenceBy != "":
				from(f.Name, c.SequenceBy, []Transformation{{Type: "DIRECT", Subtype: "TRANSFORMATION", Description: "the version's validity interval, from " + c.SequenceBy}})
			case slices.Contains(in, f.Name):
				from(f.Name, f.Name, identity)
			}
		}
	case *jobs.SCD1Config:
		in := sourceCols(c.Source)
		for _, f := range decl.Schema.Fields {
			if slices.Contains(in, f.Name) {
				from(f.Name, f.Name, identity)
			}
		}
	case *jobs.FactLoadConfig:
		in := sourceCols(c.Source)
		reads, _ := c.Tables()
		for _, f := range decl.Schema.Fields {
			if slices.Contains(in, f.Name) {
				from(f.Name, f.Name, identity)
			}
		}
		for _, l := range c.Lookups {
			i := slices.Index(reads, l.Dimension)
			if i < 0 || i >= len(inputs) {
				continue
			}
			dim := inputs[i]
			sk := l.DimensionColumns().SurrogateKey
			fields[l.Key] = columnFields{InputFields: []InputField{{Namespace: dim.Namespace, Name: dim.Name, Field: sk,
				Transformations: []Transformation{{Type: "INDIRECT", Subtype: "JOIN", Description: "the surrogate key of the version valid at " + l.At}}}}}
		}
	default:
		return nil
	}
	if len(fields) == 0 {
		return nil
	}
	return columnLineageFacet{facet: base(columnLineageURL), Fields: fields}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
