package pipelines

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// The engines a stage may run on.
const (
	EngineLocal = "local" // this process (the default)
	EngineSpark = "spark" // a Spark cluster through Spark Connect
)

// SparkSettings name the Spark cluster of a pipeline's spark stages.
type SparkSettings struct {
	// Remote is the Spark Connect address: sc://host:15002, optionally with
	// /;token=...;user_id=...;use_ssl=true (use ${VAR} for the token).
	Remote string `yaml:"remote"`
	// Conf are Spark session confs set for every stage attempt (e.g. S3 credentials
	// for s3a://; secrets from ${VAR}).
	Conf map[string]string `yaml:"conf"`
	// Warehouse is the warehouse as the cluster reads it, when it differs from the
	// pipeline's (default: the same directory; s3:// becomes s3a://).
	Warehouse string `yaml:"warehouse"`
}

// UsesSpark reports whether any stage of the pipeline runs on Spark.
func (s *Spec) UsesSpark() bool {
	for _, st := range s.Stages {
		if st.Engine == EngineSpark {
			return true
		}
	}
	return false
}

// checkEngines resolves each stage's engine (its own, else the pipeline's, else local)
// and checks the Spark settings the spark stages need.
func checkEngines(ps *problems, root *yaml.Node, spec *Spec, fs *fileSpec, stageNodes []*yaml.Node) {
	valid := func(n *yaml.Node, what, e string) bool {
		switch e {
		case "", EngineLocal, EngineSpark:
			return true
		}
		ps.at(n, "%s: unknown engine %q; expected local or spark", what, e)
		return false
	}
	_, en := mapEntry(root, "engine")
	spec.Engine = EngineLocal
	if valid(en, "engine", fs.Engine) && fs.Engine != "" {
		spec.Engine = fs.Engine
	}
	spec.Spark = fs.Spark
	var sparkStage *yaml.Node
	for i, st := range spec.Stages {
		var n *yaml.Node
		if i < len(stageNodes) {
			_, n = mapEntry(stageNodes[i], "engine")
		}
		if !valid(n, "stage "+st.Name, st.Engine) || st.Engine == "" {
			st.Engine = spec.Engine
		}
		if st.Engine == EngineSpark && sparkStage == nil && i < len(stageNodes) {
			sparkStage = stageNodes[i]
			if n != nil {
				sparkStage = n
			}
		}
	}
	_, sv := mapEntry(root, "spark")
	if sparkStage != nil && spec.Spark.Remote == "" {
		at := sv
		if at == nil {
			at = en
		}
		if at == nil {
			at = sparkStage
		}
		ps.at(at, "spark.remote: required when a stage runs with engine: spark (e.g. sc://spark-host:15002)")
	}
	if r := spec.Spark.Remote; r != "" && !strings.HasPrefix(r, "sc://") {
		ps.at(lookup(sv, "remote"), "spark.remote: %q is not a Spark Connect address; expected sc://host:port", r)
	}
}

// StageRun is one attempt of a compiled stage, as an engine carries it out.
type StageRun struct {
	Spec    *Spec
	Stage   *StageSpec
	Env     *jobs.Env
	Attempt int
}

// Key is the attempt's task key: pipeline/stage/run/attempt.
func (r StageRun) Key() string {
	return fmt.Sprintf("%s/%s/%s/%d", r.Spec.Name, r.Stage.Name, r.Env.Lineage.RunID, r.Attempt)
}
