package pipelines

import (
	"strings"
	"testing"
)

// A fact_load is checked against its tables and its dimension's scd2_merge at load time,
// and refused on Spark, each problem at its line.
func TestFactLoadChecks(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"spark", "    lookups:\n", "    engine: spark\n    lookups:\n",
			[]string{"stage sales: fact_load runs on the local engine only", "set engine: local"}},
		{"no scd2_merge", "    kind: scd2_merge\n", "    kind: scd1_merge\n",
			[]string{"no scd2_merge stage of this pipeline writes dim.customer"}},
		{"no surrogate key", "    columns: {surrogate_key: customer_sk}\n", "",
			[]string{"declares no columns.surrogate_key"}},
		{"missing policy", "        key: customer_sk\n", "        key: customer_sk\n        missing: maybe\n",
			[]string{`lookups[0].missing: unknown value "maybe"; expected unknown, inferred, fail or quarantine`}},
		{"inferred without the dimension's flag", "        key: customer_sk\n", "        key: customer_sk\n        missing: inferred\n",
			[]string{"lookups[0].missing: inferred adds placeholder versions to dim.customer", "must declare columns.inferred", "first_valid_from: <timestamp>"}},
		{"inferred flag without first_valid_from", "    columns: {surrogate_key: customer_sk}\n", "    columns: {surrogate_key: customer_sk, inferred: is_current}\n",
			[]string{"columns.inferred: needs first_valid_from: <timestamp>"}},
		{"fact table lacks at", "      - {name: sold_at, type: timestamp}\n      - {name: customer_sk", "      - {name: customer_sk",
			[]string{"lookups[0].at: table fact.sales has no column \"sold_at\""}},
		{"quarantine table", "        key: customer_sk\n", "        key: customer_sk\n        missing: quarantine\n    quarantine_table: fact.sales_bad\n",
			[]string{`quarantine_table: table "fact.sales_bad" is not declared under tables`}},
		{"key column type", "      - {name: customer_sk, type: bigint}\n", "      - {name: customer_sk, type: string}\n",
			[]string{"column fact.sales.customer_sk is string, expected bigint"}},
		{"unknown member in a non-nullable key", "      - {name: customer_id, type: string}\n      - {name: city, type: string}\n      - {name: valid_from",
			"      - {name: customer_id, type: string, nullable: false}\n      - {name: city, type: string}\n      - {name: valid_from",
			[]string{"facts.yaml:66:9: stage sales: lookups[0].missing: unknown writes an unknown member row to dim.customer whose customer_id is NULL, but the column is declared nullable: false"}},
		{"positive unknown key", "        key: customer_sk\n", "        key: customer_sk\n        unknown_key: 3\n",
			[]string{"lookups[0].unknown_key: 3: must be 0 or negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := strings.LastIndex(factPipeline, tc.from)
			if i < 0 {
				t.Fatalf("%q not in the pipeline", tc.from)
			}
			text := factPipeline[:i] + tc.to + factPipeline[i+len(tc.from):]
			if tc.name == "spark" {
				text = strings.Replace(text, "stages:\n", "spark: {remote: \"sc://localhost:15002\"}\nstages:\n", 1)
			}
			_, err := Parse("facts.yaml", []byte(text), Options{})
			if err == nil {
				t.Fatal("the pipeline loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if !strings.Contains(err.Error(), "facts.yaml:") {
				t.Errorf("error does not name the file and line: %v", err)
			}
		})
	}
	if _, err := Parse("facts.yaml", []byte(factPipeline), Options{}); err != nil {
		t.Fatalf("the valid pipeline: %v", err)
	}
}
