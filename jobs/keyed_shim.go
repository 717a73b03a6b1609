package jobs

// Temporary: what the ingest stages not yet on the keyed run (jobs/internal/keyed) use
// of the machinery that moved there. Goes with them.

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

func holdBudget(budget int64) func()       { return keyed.HoldBudget(budget) }
func workingSet(budget int64) int64        { return keyed.WorkingSet(budget) }
func releaseRecords(r []arrow.RecordBatch) { keyed.Release(r) }
func keyHash(key []byte) int64             { return keyed.Hash(key) }

var errOverBudget = errors.New("over the memory budget")

func appendKey(buf []byte, rec arrow.RecordBatch, cols []int, keys []int, i int) ([]byte, error) {
	kc := make([]int, len(keys))
	for j, k := range keys {
		kc[j] = cols[k]
	}
	return keyed.AppendKey(buf, rec, kc, i)
}
