package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// new_columns: fill judges the values it fills with the stage's row checks, as the
// events that bring them are judged: drop (and quarantine) leave the key's open version
// unfilled, fail stops the run before the fill's commit, naming the fill.
func TestSCD2NewColumnsFillIsJudged(t *testing.T) {
	for _, action := range []string{ActionDrop, ActionQuarantine, ActionFail} {
		t.Run(action, func(t *testing.T) {
			staging, dim := customerTables(t)
			clock := &testClock{t: d1}
			rejects := rejectsTable(t)
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, rejects)
			cfg := scd2Config()
			cfg.NewColumns = "fill"
			if action == ActionQuarantine {
				cfg.QuarantineTable = rejects.Name
			}
			at := func(h int) time.Time { return d1.Add(time.Duration(h) * time.Hour) }
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", at(0)}, []any{"C2", "Grace", "Boston", at(0)})
			runStage(t, NewSCD2Merge("merge", cfg), env)

			clock.Advance(time.Hour)
			staging.Schema = schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp", "segment string")
			dim.Schema = schemaOf(t, "customer_sk bigint", "customer_id string", "name string", "city string", "valid_from timestamp", "valid_to timestamp", "is_current boolean", "segment string")
			customerSK(dim)
			cfg.Track = []string{"city", "segment"}
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", at(20), "retail"}, []any{"C2", "Grace", "Boston", at(20), "bad"})
			env.Expectations = []Expectation{{Name: "known_segment", Expect: "segment IS NULL OR segment <> 'bad'", OnViolation: action}}
			res, err := NewSCD2Merge("merge", cfg).Run(context.Background(), env)
			got := tableRows(t, env, dim, "customer_id", "city", "segment", "is_current")
			if action == ActionFail {
				var ee *ExpectationError
				if !errors.As(err, &ee) || !strings.Contains(err.Error(), "new_columns: fill of segment") || !strings.Contains(err.Error(), `"segment":"bad"`) {
					t.Fatalf("err = %v, want the expectation naming the fill's row", err)
				}
				if w := []string{"C1|Seattle|NULL|true", "C2|Boston|NULL|true"}; !slices.Equal(got, w) {
					t.Fatalf("a failed fill changed the dimension:\n%s", diff(got, w))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// C2's open version keeps NULL; the merge then drops its "bad" event too.
			if w := []string{"C1|Seattle|retail|true", "C2|Boston|NULL|true"}; !slices.Equal(got, w) {
				t.Fatalf("dimension after the fill:\n%s\nnotes %q", diff(got, w), res.Notes)
			}
			// The fill's 2 rows and the merge's 2 events, one of each violating.
			if c := res.Expectations; len(c) != 1 || c[0].Rows != 4 || c[0].Failed != 2 {
				t.Fatalf("checks %+v, want 2 of 4 rows dropped (the fill's and the merge's)", c)
			}
			// Quarantined once: the merge's event, not the fill's row.
			if action == ActionQuarantine {
				if got, w := tableRows(t, env, rejects, "expectation", "source_file", "line", "value"), []string{"known_segment|staging.customers version 3|NULL|bad"}; !slices.Equal(got, w) {
					t.Fatalf("quarantine:\n%s", diff(got, w))
				}
			}
		})
	}
}
