package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSCD2RowChecks merges a change feed batch of 100,000 events (every key of the
// dimension moves city) without row checks, with one that warns and with one that
// drops (the last 1,000 keys, one in a hundred, violate it): the first is the path every merge
// without expectations takes, to compare with the build before row checks came to the
// merges; the others say what a check costs. cpu-s/op (the process's CPU time over
// the merge) is steadier than the wall time on a shared machine.
//
//	go test ./jobs -run '^$' -bench SCD2RowChecks -benchtime 5x -count 5
func BenchmarkSCD2RowChecks(b *testing.B) {
	const n = 100_000
	cases := []struct {
		name string
		exps []Expectation
	}{
		{"none", nil},
		{"warn", []Expectation{{Name: "early_key", Expect: "customer_id < 'C00099000'", OnViolation: ActionWarn}}},
		{"drop", []Expectation{{Name: "early_key", Expect: "customer_id < 'C00099000'", OnViolation: ActionDrop}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.StopTimer()
			var cpu time.Duration
			for range b.N {
				env, stage, staging := scd2BenchSetup(b, n)
				keys := make([]int, n)
				for i := range keys {
					keys[i] = i
				}
				appendCustomers(b, env, staging, keys, "Portland", d2)
				env.Expectations = c.exps
				b.StartTimer()
				before := processCPU(b)
				res, err := stage.Run(context.Background(), env)
				cpu += processCPU(b) - before
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if len(c.exps) > 0 && (len(res.Expectations) != 1 || res.Expectations[0].Rows != n) {
					b.Fatal(fmt.Sprintf("row check results %+v, want %d rows checked", res.Expectations, n))
				}
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
