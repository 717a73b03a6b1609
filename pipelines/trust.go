package pipelines

import (
	"net/url"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// This file holds what a pipeline says about trusting its output: the deadline of its
// scheduled runs, the freshness of its tables (decoded with the tables) and where its
// OpenLineage events go.

// parsesAsDuration reports whether a scalar node holds a valid duration (a zero one
// that does not was already reported by the decoder).
func parsesAsDuration(n *yaml.Node) bool {
	var d jobs.Duration
	return n != nil && n.Kind == yaml.ScalarNode && d.UnmarshalText([]byte(n.Value)) == nil
}

// Lineage is where a pipeline's OpenLineage events go: URL is the consumer's base URL
// (events are POSTed to URL + Endpoint, as OpenLineage's HTTP transport does), Display
// the URL as written (its ${VAR} references unexpanded) for records and logs, Namespace
// the jobs' namespace. APIKey, when set, is sent as a bearer token; it never appears in
// an event, a record or a log.
type Lineage struct {
	URL, Display string
	Endpoint     string
	Namespace    string
	APIKey       string
}

// Enabled reports whether events are sent.
func (l Lineage) Enabled() bool { return l.URL != "" }

// Lineage defaults and the environment variables OpenLineage's clients read.
const (
	DefaultLineageEndpoint  = "api/v1/lineage"
	DefaultLineageNamespace = "orchestrator"
	EnvLineageURL           = "OPENLINEAGE_URL"
	EnvLineageNamespace     = "OPENLINEAGE_NAMESPACE"
	EnvLineageEndpoint      = "OPENLINEAGE_ENDPOINT"
	EnvLineageAPIKey        = "OPENLINEAGE_API_KEY"
)

type lineageSpec struct {
	URL       string `yaml:"url"`
	Endpoint  string `yaml:"endpoint"`
	Namespace string `yaml:"namespace"`
	APIKey    string `yaml:"api_key"`
}

// checkTrust validates deadline and lineage into spec. The lineage settings left out
// come from OpenLineage's environment variables (OPENLINEAGE_URL, ..._NAMESPACE,
// ..._ENDPOINT, ..._API_KEY), as its own clients read them.
func checkTrust(ps *problems, root *yaml.Node, spec *Spec, fs *fileSpec, raw map[*yaml.Node]string, getenv func(string) (string, bool)) {
	key := func(path string) *yaml.Node { return lookup(root, path) }
	if fs.Deadline != nil {
		spec.Deadline = time.Duration(*fs.Deadline)
		switch {
		case spec.Deadline == 0 && !parsesAsDuration(key("deadline")):
		case spec.Deadline <= 0:
			ps.at(key("deadline"), "deadline: must be longer than 0, got %s", spec.Deadline)
		case spec.Schedule == "":
			ps.at(key("deadline"), "deadline applies to scheduled runs (how long after its slot a run must have ended): this pipeline has no schedule")
		}
	}
	env := func(name string) string {
		if v, ok := getenv(name); ok {
			return strings.TrimSpace(v)
		}
		return ""
	}
	l := fs.Lineage
	lin := Lineage{URL: l.URL, Display: l.URL, Endpoint: l.Endpoint, Namespace: l.Namespace, APIKey: l.APIKey}
	if r, ok := raw[key("lineage.url")]; ok && l.URL != "" {
		lin.Display = r
	}
	if lin.URL == "" {
		lin.URL = env(EnvLineageURL)
		lin.Display = "$" + EnvLineageURL
	}
	if lin.URL == "" {
		return
	}
	lin.Endpoint = or(lin.Endpoint, or(env(EnvLineageEndpoint), DefaultLineageEndpoint))
	lin.Namespace = or(lin.Namespace, or(env(EnvLineageNamespace), DefaultLineageNamespace))
	lin.APIKey = or(lin.APIKey, env(EnvLineageAPIKey))
	u, err := url.Parse(lin.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		at := key("lineage.url")
		if l.URL == "" {
			at = root
		}
		ps.at(at, "lineage: url %q is not an http(s) URL", lin.Display)
		return
	}
	if u.User != nil {
		ps.at(key("lineage.url"), "lineage: url %q holds credentials: give them as api_key (sent as a bearer token), which no event or record shows", lin.Display)
		return
	}
	spec.Lineage = lin
}

// checkFreshness validates a table's freshness (nil: none) into spec.Freshness.
func checkFreshness(ps *problems, tableNode *yaml.Node, spec *Spec, table string, f *jobs.Duration) {
	if f == nil {
		return
	}
	d := time.Duration(*f)
	switch {
	case d == 0 && !parsesAsDuration(lookup(tableNode, "freshness")): // the decoder said what is wrong
	case d <= 0:
		ps.at(lookup(tableNode, "freshness"), "table %s: freshness must be longer than 0, got %s", table, d)
	default:
		if spec.Freshness == nil {
			spec.Freshness = map[string]time.Duration{}
		}
		spec.Freshness[table] = d
	}
}
