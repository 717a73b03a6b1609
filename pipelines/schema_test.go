package pipelines

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// TestJSONSchemaCoversEveryKey keeps the editor schema in step with the decoder: every key
// the YAML decoder accepts is in the schema, and the schema has no key the decoder lacks.
func TestJSONSchemaCoversEveryKey(t *testing.T) {
	b, err := os.ReadFile("schema/pipeline.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	checkKeys(t, "top level", keysOf(schema.Properties), yamlKeys(reflect.TypeFor[fileSpec]()))

	var stages struct {
		Items struct {
			AllOf []struct {
				If struct {
					Properties struct {
						Kind struct{ Const string } `json:"kind"`
					} `json:"properties"`
				} `json:"if"`
				Then struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"then"`
			} `json:"allOf"`
		} `json:"items"`
	}
	if err := json.Unmarshal(schema.Properties["stages"], &stages); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range stages.Items.AllOf {
		kind := v.If.Properties.Kind.Const
		cfg, ok := jobs.NewConfig(jobs.Kind(kind))
		if !ok {
			t.Errorf("schema has unknown stage kind %q", kind)
			continue
		}
		seen[kind] = true
		want := append(yamlKeys(reflect.TypeFor[stageCommon]()), yamlKeys(reflect.TypeOf(cfg).Elem())...)
		checkKeys(t, "stage kind "+kind, keysOf(v.Then.Properties), want)
	}
	for _, k := range jobs.Kinds {
		if !seen[string(k)] {
			t.Errorf("schema lacks stage kind %s", k)
		}
	}
}

func keysOf(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func checkKeys(t *testing.T, where string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: schema keys %v, decoder keys %v", where, got, want)
	}
}
