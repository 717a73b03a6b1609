package pipelines

import (
	"strings"
	"testing"
	"time"
)

const trustYAML = `pipeline: trust
schedule: "0 2 * * *"
deadline: 45m
%LINEAGE%
tables:
  raw.t:
    freshness: 26h
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
  raw.u:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: in/*.csv, target: raw.t}
`

// Deadline, freshness and lineage load into the Spec; the lineage settings left out
// come from OpenLineage's environment variables, and a URL given through ${VAR} shows
// as written.
func TestTrustSettings(t *testing.T) {
	cases := []struct {
		name    string
		lineage string
		env     map[string]string
		want    Lineage
	}{
		{"none", "", nil, Lineage{}},
		{"from the file", "lineage: {url: \"${OL}\", namespace: prod, api_key: \"${KEY}\"}",
			map[string]string{"OL": "http://marquez:5000", "KEY": "s3cret"},
			Lineage{URL: "http://marquez:5000", Display: "${OL}", Endpoint: DefaultLineageEndpoint, Namespace: "prod", APIKey: "s3cret"}},
		{"from the environment", "", map[string]string{EnvLineageURL: "https://lineage.example", EnvLineageNamespace: "team", EnvLineageEndpoint: "api/v2/events"},
			Lineage{URL: "https://lineage.example", Display: "$OPENLINEAGE_URL", Endpoint: "api/v2/events", Namespace: "team"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(trustYAML, "%LINEAGE%", c.lineage, 1)
			spec, err := Parse("trust.yaml", []byte(src), Options{LookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }})
			if err != nil {
				t.Fatal(err)
			}
			if spec.Deadline != 45*time.Minute {
				t.Errorf("deadline %s, want 45m", spec.Deadline)
			}
			if got := spec.Freshness; len(got) != 1 || got["raw.t"] != 26*time.Hour {
				t.Errorf("freshness %v, want raw.t: 26h only", got)
			}
			if spec.Lineage != c.want {
				t.Errorf("lineage %+v, want %+v", spec.Lineage, c.want)
			}
		})
	}
}
