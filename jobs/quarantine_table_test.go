package jobs

import (
	"slices"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A quarantined row holds its line where its file has lines (CSV), and for Parquet the
// row's number in the file (as the error names it); the expectation's name either way,
// once across reruns. (A Parquet record that does not decode has NULL there.)
func TestQuarantineLineOfIngestRows(t *testing.T) {
	for _, c := range []struct {
		ext  string
		file []byte
		want string
	}{
		{"csv", []byte("id,qty,amount,sold_at\nT1,2,23.80,2026-01-14T09:12:00Z\nT2,1,149.00,2026-01-14T10:40:00Z\n"), "3|qty|1|big"},
		{"parquet", salesParquet(t), "2|qty|1|big"},
	} {
		t.Run(c.ext, func(t *testing.T) {
			sales, rejects := salesTable(t), rejectsTable(t)
			env, landing := ingestEnv(t, mem.New(mem.Config{}), sales, rejects)
			env.Expectations = []Expectation{{Name: "big", Expect: "qty > 1", OnViolation: ActionQuarantine}}
			putFile(t, landing, "sales/a."+c.ext, string(c.file))
			stage := NewIngest("ingest", &IngestConfig{Source: "/landing/sales/*." + c.ext, Target: sales.Name, QuarantineTable: rejects.Name})
			runStage(t, stage, env)
			runStage(t, stage, env)
			if got := tableRows(t, env, rejects, "line", "column", "value", "expectation"); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("quarantine:\n%s", diff(got, []string{c.want}))
			}
			if got := tableRows(t, env, sales, "id"); !slices.Equal(got, []string{"T1"}) {
				t.Fatalf("target rows %v, want [T1]", got)
			}
		})
	}
}
