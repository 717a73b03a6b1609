package pipelines

import (
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// scd2_merge's options load from YAML (an explicit null is told apart from no value),
// reach the fact_load lookups of the dimension, and bad values, a non-nullable valid_to
// under open_end: null and the options on Spark are refused at their line.
func TestSCD2OptionsLoad(t *testing.T) {
	with := func(opts string) string {
		return strings.Replace(factPipeline, "    columns: {surrogate_key: customer_sk}\n", "    columns: {surrogate_key: customer_sk}\n"+opts, 1)
	}
	spec, err := Parse("facts.yaml", []byte(with("    open_end: null\n    first_valid_from: 1900-01-01\n    ignore_null_updates: true\n")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var merge *jobs.SCD2Config
	for _, st := range spec.Stages {
		if c, ok := st.Config.(*jobs.SCD2Config); ok {
			merge = c
		}
	}
	if !merge.OpenEnd.Null || merge.FirstValidFrom.Text != "1900-01-01" || !merge.IgnoreNullUpdates {
		t.Fatalf("options decoded as %+v %+v %v", merge.OpenEnd, merge.FirstValidFrom, merge.IgnoreNullUpdates)
	}
	if _, err := Parse("facts.yaml", []byte(with("    open_end: 2999-12-31 23:59:59\n    first_valid_from: sequence\n")), Options{}); err != nil {
		t.Fatalf("a sentinel open end: %v", err)
	}
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"bad open_end", with("    open_end: someday\n"), []string{"facts.yaml:54:15: ", `open_end: "someday" is no timestamp or date`}},
		{"null first_valid_from", with("    first_valid_from: null\n"), []string{"facts.yaml:54:23: ", "first_valid_from: expected sequence or a timestamp"}},
		{"bad ignore_null_updates", with("    ignore_null_updates: maybe\n"), []string{"facts.yaml:54:26: ", "expected true or false"}},
		{"non-nullable valid_to", strings.Replace(with("    open_end: null\n"), "{name: valid_to, type: timestamp}", "{name: valid_to, type: timestamp, nullable: false}", 1),
			[]string{"facts.yaml:54:15: ", "open_end: null writes NULL into dim.customer.valid_to", "declared nullable: false"}},
		{"spark", strings.Replace(with("    engine: spark\n    open_end: null\n"), "stages:\n", "spark: {remote: \"sc://localhost:15002\"}\nstages:\n", 1),
			[]string{"facts.yaml:56:15: ", "stage customers: open_end runs on the local engine only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("facts.yaml", []byte(tc.text), Options{})
			if err == nil {
				t.Fatal("the pipeline loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
