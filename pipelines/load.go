package pipelines

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

// Defaults applied to omitted settings.
const (
	DefaultMaxParallel   = 4
	DefaultRetryDelay    = 10 * time.Second
	DefaultMaxRetryDelay = 5 * time.Minute
)

// fileSpec is the top level of a pipeline file as written.
type fileSpec struct {
	Pipeline    string    `yaml:"pipeline"`
	Description string    `yaml:"description"`
	Schedule    string    `yaml:"schedule"`
	Timezone    string    `yaml:"timezone"`
	Warehouse   string    `yaml:"warehouse"`
	Storage     Storage   `yaml:"storage"`
	Identity    string    `yaml:"identity"`
	MaxParallel int       `yaml:"max_parallel"`
	Tables      yaml.Node `yaml:"tables"`
	Stages      yaml.Node `yaml:"stages"`

	Catchup       string         `yaml:"catchup"`
	CatchupWindow *jobs.Duration `yaml:"catchup_window"`
	Overlap       string         `yaml:"overlap"`
	MaxActiveRuns *int           `yaml:"max_active_runs"`
	Params        []paramSpec    `yaml:"params"`
	History       historySpec    `yaml:"history"`
	Notify        notifySpec     `yaml:"notify"`
	Engine        string         `yaml:"engine"`
	Spark         SparkSettings  `yaml:"spark"`
	Deadline      *jobs.Duration `yaml:"deadline"`
	Lineage       lineageSpec    `yaml:"lineage"`
}

type tableSpec struct {
	Path        string            `yaml:"path"`
	Description string            `yaml:"description"`
	Columns     []yaml.Node       `yaml:"columns"`
	PartitionBy []string          `yaml:"partition_by"`
	ClusterBy   []string          `yaml:"cluster_by"`
	Properties  map[string]string `yaml:"properties"`
	Freshness   *jobs.Duration    `yaml:"freshness"`
}

type columnSpec struct {
	Name     string        `yaml:"name"`
	Type     string        `yaml:"type"`
	Nullable *bool         `yaml:"nullable"`
	Comment  string        `yaml:"comment"`
	Identity *identitySpec `yaml:"identity"`
	// RenamedFrom is the name the column has in an existing table: the run renames it.
	RenamedFrom string `yaml:"renamed_from"`
}

type identitySpec struct {
	Start               *int64 `yaml:"start"`
	Step                *int64 `yaml:"step"`
	AllowExplicitInsert bool   `yaml:"allow_explicit_insert"`
}

// stageCommon holds the keys every stage has; the rest belong to its kind's config.
type stageCommon struct {
	Name          string         `yaml:"name"`
	Description   string         `yaml:"description"`
	Kind          string         `yaml:"kind"`
	DependsOn     []string       `yaml:"depends_on"`
	Retries       int            `yaml:"retries"`
	RetryDelay    *jobs.Duration `yaml:"retry_delay"`
	MaxRetryDelay *jobs.Duration `yaml:"max_retry_delay"`
	Timeout       jobs.Duration  `yaml:"timeout"`
	Engine        string         `yaml:"engine"`
	// Expectations are the stage's data quality checks (jobs.Expectation).
	Expectations []jobs.Expectation `yaml:"expectations"`
}

// Options adjust loading.
type Options struct {
	// LookupEnv resolves ${VAR}; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// TablesOnly is for callers that use the pipeline's tables and warehouse only (the
	// table commands): an unset ${VAR} in a stage value is left as written, not a problem.
	TablesOnly bool

	// vars, when set, expand the run-time references in stage values (Spec.Bind).
	vars map[string]string
}

// Load reads and validates the pipeline file at path.
func Load(path string, opts Options) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	return Parse(path, data, opts)
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
	columnRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Parse validates a pipeline given as bytes; file names it in problems and anchors
// relative paths. Every problem is reported in one *Error.
func Parse(file string, data []byte, opts Options) (*Spec, error) {
	ps := &problems{file: file}
	getenv := opts.LookupEnv
	if getenv == nil {
		getenv = osLookupEnv
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.list = append(ps.list, yamlSyntaxProblem(file, err))
		return nil, ps.err()
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		ps.at(nil, "empty pipeline file: expected a mapping with pipeline, tables and stages")
		return nil, ps.err()
	}
	root := doc.Content[0]
	checkDuplicateKeys(ps, root)
	raw := map[*yaml.Node]string{}
	if _, stages := mapEntry(root, "stages"); stages != nil && opts.TablesOnly {
		expandEnv(ps, stages, getenv, raw, true)
	}
	expandEnv(ps, root, getenv, raw, false)
	if _, stages := mapEntry(root, "stages"); stages != nil && opts.vars != nil {
		expandRunRefs(stages, opts.vars)
	}

	var fs fileSpec
	decodeInto(ps, root, &fs, "")
	abs, _ := filepath.Abs(file)
	spec := &Spec{
		File:        file,
		Dir:         filepath.Dir(abs),
		Name:        fs.Pipeline,
		Description: fs.Description,
		Schedule:    strings.TrimSpace(fs.Schedule),
		Location:    time.UTC,
		Warehouse:   fs.Warehouse,
		Storage:     fs.Storage,
		Identity:    fs.Identity,
		MaxParallel: fs.MaxParallel,
		Source:      data,
		Hash:        fmt.Sprintf("%x", sha256.Sum256(data)),
		opts:        opts,
	}
	if root.Kind != yaml.MappingNode {
		if len(ps.list) == 0 { // an empty or null scalar decodes without a problem
			ps.at(root, "expected a mapping with pipeline, tables and stages")
		}
		return nil, ps.err()
	}
	checkTop(ps, root, spec, &fs)
	checkRunPolicies(ps, root, spec, &fs, raw)
	checkTrust(ps, root, spec, &fs, raw, getenv)
	checkRunRefs(ps, root, spec)
	tableNodes := decodeTables(ps, root, &fs, spec)
	stageNodes := decodeStages(ps, root, &fs, spec)
	ws := &problems{file: file}
	checkStages(ps, ws, spec, stageNodes, tableNodes)
	checkEngines(ps, root, spec, &fs, stageNodes)
	checkExpectationEngines(ps, spec, stageNodes)
	checkFactEngines(ps, spec, stageNodes)
	checkSCD2Engines(ps, spec, stageNodes)
	if err := ps.err(); err != nil {
		return nil, err
	}
	if err, ok := ws.err().(*Error); ok {
		spec.Warnings = err.Problems
	}
	markSchemaEvolution(spec)
	return spec, nil
}

// yamlSyntaxProblem turns a yaml.v3 error ("yaml: line 3: ...") into a Problem.
func yamlSyntaxProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: file, Msg: "invalid YAML: " + msg}
	if m := regexp.MustCompile(`^line (\d+): (.*)$`).FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Col = 1
		p.Msg = "invalid YAML: " + m[2]
	}
	return p
}

func checkTop(ps *problems, root *yaml.Node, spec *Spec, fs *fileSpec) {
	key := func(name string) *yaml.Node {
		k, v := mapEntry(root, name)
		if v != nil {
			return v
		}
		return k
	}
	switch {
	case spec.Name == "":
		ps.at(root, "missing key \"pipeline\": the pipeline's name")
	case !nameRE.MatchString(spec.Name):
		ps.at(key("pipeline"), "invalid pipeline name %q: expected letters, digits, '_', '.' or '-'", spec.Name)
	}
	if fs.Timezone != "" {
		loc, err := time.LoadLocation(fs.Timezone)
		if err != nil {
			ps.at(key("timezone"), "unknown time zone %q: expected an IANA name such as UTC or Europe/Berlin", fs.Timezone)
		} else {
			spec.Location = loc
		}
	}
	if spec.MaxParallel < 0 {
		ps.at(key("max_parallel"), "must be 1 or more, got %d", spec.MaxParallel)
	}
	if spec.MaxParallel == 0 {
		spec.MaxParallel = DefaultMaxParallel
	}
	if spec.Warehouse == "" {
		spec.Warehouse = filepath.Join(spec.Dir, "warehouse")
	} else {
		spec.Warehouse = storeurl.Anchor(spec.Dir, spec.Warehouse)
	}
	if _, v := mapEntry(root, "stages"); v == nil {
		ps.at(root, "missing key \"stages\": the list of stages to run")
	}
}

// decodeTables decodes the tables mapping; it returns each table's node by name.
func decodeTables(ps *problems, root *yaml.Node, fs *fileSpec, spec *Spec) map[string]*yaml.Node {
	nodes := map[string]*yaml.Node{}
	n := &fs.Tables
	if n.Kind == 0 {
		return nodes
	}
	if n.Kind != yaml.MappingNode {
		ps.at(n, "tables: expected a mapping of table name to declaration, got %s", kindName(n))
		return nodes
	}
	paths := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		if !tableNameRE.MatchString(name) {
			ps.at(k, "invalid table name %q: expected schema.table with letters, digits and '_'", name)
			continue
		}
		nodes[name] = v
		var ts tableSpec
		decodeInto(ps, v, &ts, "table "+name)
		t := &jobs.Table{
			Name:        name,
			Path:        ts.Path,
			Description: ts.Description,
			PartitionBy: ts.PartitionBy,
			ClusterBy:   ts.ClusterBy,
			Properties:  ts.Properties,
		}
		if t.Properties == nil {
			t.Properties = map[string]string{}
		}
		if t.Path == "" {
			t.Path = strings.ReplaceAll(name, ".", "/")
		}
		t.Path = strings.Trim(t.Path, "/")
		if err := validTablePath(t.Path); err != nil {
			ps.at(lookup(v, "path"), "table %s: %v", name, err)
		} else if other, dup := paths[t.Path]; dup {
			ps.at(lookup(v, "path"), "table %s: path %q is already used by table %s", name, t.Path, other)
		}
		paths[t.Path] = name
		t.Schema, t.RenamedFrom = decodeColumns(ps, v, ts.Columns, name)
		for j, pc := range t.PartitionBy {
			if t.Schema != nil && t.Schema.Field(pc) == nil {
				ps.at(lookup(v, fmt.Sprintf("partition_by[%d]", j)), "table %s: partition column %q is not a declared column", name, pc)
			}
		}
		checkProperties(ps, v, t)
		checkFreshness(ps, v, spec, name, ts.Freshness)
		if len(t.ClusterBy) > 0 && t.Schema != nil {
			if err := delta.CheckClusterBy(t.Schema, t.ClusterBy, t.PartitionBy, t.Properties); err != nil {
				ps.at(lookup(v, "cluster_by"), "table %s: %v", name, err)
			}
		}
		spec.Tables = append(spec.Tables, t)
	}
	return nodes
}

func validTablePath(p string) error {
	if p == "" {
		return fmt.Errorf("empty path")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid path %q: expected a relative path below the warehouse", p)
		}
	}
	return nil
}

// decodeColumns decodes a table's columns, and the names of those renamed_from says were
// renamed (declared name -> name in the table).
func decodeColumns(ps *problems, tableNode *yaml.Node, cols []yaml.Node, table string) (*delta.StructType, map[string]string) {
	if len(cols) == 0 {
		ps.at(tableNode, "table %s: missing columns: expected a list of {name, type}", table)
		return nil, nil
	}
	var renamed map[string]string
	renamedAt := map[string]*yaml.Node{}
	st := &delta.StructType{}
	seen := map[string]bool{}
	identities := 0
	for i := range cols {
		cn := &cols[i]
		var cs columnSpec
		decodeInto(ps, cn, &cs, fmt.Sprintf("table %s: columns[%d]", table, i))
		if cs.Name == "" {
			ps.at(cn, "table %s: column %d: missing name", table, i+1)
			continue
		}
		if !columnRE.MatchString(cs.Name) {
			ps.at(lookup(cn, "name"), "table %s: invalid column name %q: expected letters, digits and '_'", table, cs.Name)
		}
		if seen[strings.ToLower(cs.Name)] {
			ps.at(lookup(cn, "name"), "table %s: duplicate column %q (names are case-insensitive)", table, cs.Name)
		}
		seen[strings.ToLower(cs.Name)] = true
		if cs.Type == "" {
			ps.at(cn, "table %s: column %s: missing type", table, cs.Name)
			continue
		}
		dt, err := delta.ParsePrimitive(cs.Type)
		if err != nil {
			ps.at(lookup(cn, "type"), "table %s: column %s: %v; expected string, int, bigint, double, boolean, date, timestamp, decimal(p,s), ...", table, cs.Name, err)
			continue
		}
		f := &delta.StructField{Name: cs.Name, Type: dt, Nullable: cs.Nullable == nil || *cs.Nullable, Metadata: map[string]any{}}
		if cs.Comment != "" {
			f.Metadata["comment"] = cs.Comment
		}
		if id := cs.Identity; id != nil {
			identities++
			if dt.String() != delta.TypeLong {
				ps.at(lookup(cn, "type"), "table %s: identity column %s must be bigint, got %s", table, cs.Name, dt)
			}
			if identities > 1 {
				ps.at(lookup(cn, "identity"), "table %s: only one identity column is allowed", table)
			}
			start, step := int64(1), int64(1)
			if id.Start != nil {
				start = *id.Start
			}
			if id.Step != nil {
				step = *id.Step
			}
			if step == 0 {
				ps.at(lookup(cn, "identity.step"), "table %s: identity step must not be 0", table)
			}
			delta.SetIdentity(f, start, step, id.AllowExplicitInsert)
		}
		if from := cs.RenamedFrom; from != "" {
			switch {
			case !columnRE.MatchString(from):
				ps.at(lookup(cn, "renamed_from"), "table %s: column %s: invalid renamed_from %q: expected letters, digits and '_'", table, cs.Name, from)
			case strings.EqualFold(from, cs.Name):
				ps.at(lookup(cn, "renamed_from"), "table %s: column %s: renamed_from names the column itself", table, cs.Name)
			default:
				if renamed == nil {
					renamed = map[string]string{}
				}
				renamed[cs.Name], renamedAt[cs.Name] = from, lookup(cn, "renamed_from")
			}
		}
		st.Fields = append(st.Fields, f)
	}
	for _, name := range sortedKeys(renamed) {
		if from := renamed[name]; seen[strings.ToLower(from)] {
			ps.at(renamedAt[name], "table %s: column %s is renamed_from %s, which is declared too (a column renamed is no longer declared under its old name)", table, name, from)
		}
	}
	return st, renamed
}

func checkProperties(ps *problems, tableNode *yaml.Node, t *jobs.Table) {
	_, propsNode := mapEntry(tableNode, "properties")
	for k, v := range t.Properties {
		at := propsNode
		if kn, vn := mapEntry(propsNode, k); kn != nil {
			at = vn
			if !slices.Contains(delta.SettableProperties(), k) {
				at = kn
			}
		}
		if err := delta.CheckProperty(k, v); err != nil {
			if slices.Contains(delta.SettableProperties(), k) {
				ps.at(at, "table %s: property %s: %v", t.Name, k, err)
			} else {
				ps.at(at, "table %s: %v", t.Name, err)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// decodeStages decodes the stages list; it returns each stage's node in order.
func decodeStages(ps *problems, root *yaml.Node, fs *fileSpec, spec *Spec) []*yaml.Node {
	n := &fs.Stages
	if n.Kind == 0 {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		ps.at(n, "stages: expected a list of stages, got %s", kindName(n))
		return nil
	}
	var nodes []*yaml.Node
	common := fieldsByKey(reflectTypeOf[stageCommon]())
	for _, sn := range n.Content {
		if sn.Kind != yaml.MappingNode {
			ps.at(sn, "stage: expected a mapping with name, kind and the kind's settings, got %s", kindName(sn))
			continue
		}
		spec.Stages = append(spec.Stages, decodeStage(ps, sn, common, spec.Dir))
		nodes = append(nodes, sn)
	}
	if len(spec.Stages) == 0 && n.Kind == yaml.SequenceNode {
		ps.at(n, "stages: the list is empty; a pipeline needs at least one stage")
	}
	return nodes
}

// decodeStage decodes one stage's mapping sn: the keys every stage has (common) into
// the stage, the others into its kind's config, validated; an ingest's source is
// anchored at the pipeline's directory dir.
func decodeStage(ps *problems, sn *yaml.Node, common map[string]int, dir string) *Stage {
	commonNode := &yaml.Node{Kind: yaml.MappingNode, Line: sn.Line, Column: sn.Column}
	kindNode := &yaml.Node{Kind: yaml.MappingNode, Line: sn.Line, Column: sn.Column}
	for i := 0; i+1 < len(sn.Content); i += 2 {
		if _, ok := common[sn.Content[i].Value]; ok {
			commonNode.Content = append(commonNode.Content, sn.Content[i], sn.Content[i+1])
		} else {
			kindNode.Content = append(kindNode.Content, sn.Content[i], sn.Content[i+1])
		}
	}
	label := "stage"
	if _, nn := mapEntry(sn, "name"); nn != nil && nn.Kind == yaml.ScalarNode && nn.Value != "" {
		label = "stage " + nn.Value
	}
	var sc stageCommon
	decodeInto(ps, commonNode, &sc, label)
	st := &Stage{
		Name:          sc.Name,
		Description:   sc.Description,
		Kind:          jobs.Kind(sc.Kind),
		DependsOn:     sc.DependsOn,
		Retries:       sc.Retries,
		RetryDelay:    DefaultRetryDelay,
		MaxRetryDelay: DefaultMaxRetryDelay,
		Timeout:       time.Duration(sc.Timeout),
		Engine:        sc.Engine,
		Expectations:  sc.Expectations,
	}
	if sc.RetryDelay != nil {
		st.RetryDelay = time.Duration(*sc.RetryDelay)
	}
	if sc.MaxRetryDelay != nil {
		st.MaxRetryDelay = time.Duration(*sc.MaxRetryDelay)
	}
	if sc.Name == "" {
		ps.at(sn, "stage: missing name")
	} else if !nameRE.MatchString(sc.Name) {
		ps.at(lookup(sn, "name"), "invalid stage name %q: expected letters, digits, '_', '.' or '-'", sc.Name)
	}
	if sc.Retries < 0 {
		ps.at(lookup(sn, "retries"), "%s: retries must be 0 or more, got %d", label, sc.Retries)
	}
	if st.Timeout < 0 || st.RetryDelay < 0 || st.MaxRetryDelay < 0 {
		ps.at(sn, "%s: durations must not be negative", label)
	}
	cfg, ok := jobs.NewConfig(st.Kind)
	switch {
	case sc.Kind == "":
		ps.at(sn, "%s: missing kind; expected one of %s", label, kindList())
	case !ok:
		ps.at(lookup(sn, "kind"), "%s: unknown kind %q; expected one of %s", label, sc.Kind, kindList())
	default:
		decodeInto(ps, kindNode, cfg, label)
		for _, fe := range cfg.Validate() {
			if !quarantineByExpectation(st, cfg, fe) {
				ps.at(lookup(kindNode, fe.Field), "%s: %s: %s", label, fe.Field, fe.Msg)
			}
		}
		if ic, ok := cfg.(*jobs.IngestConfig); ok && ic.Source != "" && !strings.HasPrefix(ic.Source, "http://") && !strings.HasPrefix(ic.Source, "https://") {
			ic.Source = storeurl.Anchor(dir, ic.Source)
		}
		st.Config = cfg
		checkExpectations(ps, sn, st, label)
	}
	return st
}

func kindList() string {
	names := make([]string, len(jobs.Kinds))
	for i, k := range jobs.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// checkStages checks what spans stages and tables: names, dependencies and cycles, and
// that every table a stage uses is declared and fits the stage. What is valid but likely
// to stop a run goes to ws.
func checkStages(ps, ws *problems, spec *Spec, nodes []*yaml.Node, tableNodes map[string]*yaml.Node) {
	dagNodes := make([]dag.Node, len(spec.Stages))
	for i, st := range spec.Stages {
		dagNodes[i] = dag.Node{Name: st.Name, DependsOn: st.DependsOn, Task: dag.TaskFunc(nil)}
	}
	if _, err := dag.New(dagNodes); err != nil {
		if ve, ok := err.(*dag.ValidationError); ok {
			for _, p := range ve.Problems {
				reportDagProblem(ps, spec, nodes, p)
			}
		}
	}
	for i, st := range spec.Stages {
		if st.Config == nil {
			continue
		}
		checkStageTables(ps, ws, spec, nodes[i], st)
		checkExpectationTables(ps, spec, nodes[i], st)
	}
}

func reportDagProblem(ps *problems, spec *Spec, nodes []*yaml.Node, p dag.Problem) {
	if p.Index < 0 || p.Index >= len(nodes) {
		return
	}
	sn := nodes[p.Index]
	switch {
	case p.Kind == dag.ErrEmptyName, p.Kind == dag.ErrNilTask:
		// reported while decoding / not applicable
	case p.Kind == dag.ErrDuplicateName:
		ps.at(lookup(sn, "name"), "duplicate stage name %q", p.Node)
	case p.Kind == dag.ErrUnknownDependency:
		at := lookup(sn, "depends_on")
		for j, d := range spec.Stages[p.Index].DependsOn {
			if d == p.Dep {
				at = lookup(sn, fmt.Sprintf("depends_on[%d]", j))
			}
		}
		ps.at(at, "stage %s depends on %q, which is not a stage of this pipeline", p.Node, p.Dep)
	case p.Kind == dag.ErrDuplicateDependency:
		ps.at(lookup(sn, "depends_on"), "stage %s lists %q twice in depends_on", p.Node, p.Dep)
	case p.Kind == dag.ErrCycle:
		ps.at(lookup(sn, "depends_on"), "dependency cycle: %s", strings.Join(p.Cycle, " -> "))
	default:
		ps.at(sn, "stage %s: %v", p.Node, p)
	}
}
