package pipelines

import (
	"time"

	"github.com/orchestrator-io/orchestrator/cron"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// Spec is a validated pipeline. Build one with Load or Parse; never modify it.
type Spec struct {
	// File is the path the pipeline was read from; Dir its directory, against which
	// relative paths in the file (warehouse, ingest sources) are resolved.
	File, Dir   string
	Name        string
	Description string
	// Schedule is a cron expression (5 or 6 fields, a descriptor such as @daily, or
	// @every 10m), or "" for a pipeline that only runs on demand; Location is the zone it
	// is read in (default UTC); Cron is the parsed schedule (nil without one).
	Schedule string
	Location *time.Location
	Cron     *cron.Schedule
	// Catchup (none, latest, all) picks which slots missed while no scheduler ran are
	// run, within CatchupWindow; Overlap (skip, queue, allow) what a slot does when
	// MaxActiveRuns runs of the pipeline are active (0: no limit, allowed only with
	// overlap allow).
	Catchup       string
	CatchupWindow time.Duration
	Overlap       string
	MaxActiveRuns int
	// Params are the declared run parameters, in declaration order.
	Params  []Param
	History History
	Notify  Notify
	// Deadline is how long after its slot a scheduled run must have ended (0: none);
	// Freshness the longest a declared table may go without a commit that changed its
	// data, by table name (trust.go).
	Deadline  time.Duration
	Freshness map[string]time.Duration
	// Lineage is where OpenLineage events of the runs go (URL "": none).
	Lineage Lineage
	// Warehouse is where tables live: an absolute directory, file:// URL, s3://bucket/prefix
	// or mem:// URL. Default: the directory "warehouse" next to the pipeline file.
	Warehouse string
	Storage   Storage
	// Identity is the userName recorded in every commit (default: the OS user).
	Identity string
	// MaxParallel bounds how many stages run at once (default 4).
	MaxParallel int
	// Engine is the stages' default engine (local or spark); Spark names the cluster
	// of the spark stages (engine.go).
	Engine string
	Spark  SparkSettings
	Tables []*jobs.Table // in declaration order
	Stages []*Stage      // in declaration order
	// Warnings are what is valid but likely to stop a run (a merge key that may be
	// NULL in its source), at their positions; validate prints them.
	Warnings []Problem

	// Source is the file as read (its ${VAR} references unexpanded), the definition a
	// run record keeps; Hash is its SHA-256 in hex.
	Source []byte
	Hash   string

	opts Options // as loaded, for Bind
}

// Table returns the declared table with that name, or nil.
func (s *Spec) Table(name string) *jobs.Table {
	for _, t := range s.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Stage returns the stage with that name, or nil.
func (s *Spec) Stage(name string) *Stage {
	for _, st := range s.Stages {
		if st.Name == name {
			return st
		}
	}
	return nil
}

// Storage holds the S3 settings used for s3:// locations; empty fields fall back to the
// standard AWS_* environment variables.
type Storage struct {
	Endpoint        string `yaml:"endpoint"`
	Region          string `yaml:"region"`
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	SessionToken    string `yaml:"session_token"`
	PathStyle       *bool  `yaml:"path_style"`
	Insecure        bool   `yaml:"insecure"` // plain http, as for a local MinIO
}

// Stage is one validated stage of a pipeline.
type Stage struct {
	Name        string
	Description string
	Kind        jobs.Kind
	DependsOn   []string
	// Retries is how many more attempts follow a failed one, RetryDelay the first wait
	// (doubling, with jitter, up to MaxRetryDelay), Timeout the limit of one attempt.
	Retries       int
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	Timeout       time.Duration
	Config        jobs.Config
	// Engine runs the stage: local or spark (engine.go); "" before Parse resolves it
	// from the pipeline's engine.
	Engine string
	// Expectations are the stage's data quality checks, validated.
	Expectations []jobs.Expectation
}
