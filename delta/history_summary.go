package delta

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Summary sums up what a commit changed from its operation metrics, as the CLI's and the
// web's history show it: rows inserted (+), updated (~) and deleted (-), then files
// added, deleted or restored, e.g. "+3 ~1 -0 rows, 2 files". It is "" for a commit whose
// metrics say none of that. It reads Spark's, delta-rs's and our metric names.
func (h HistoryEntry) Summary() string {
	m := h.OperationMetrics
	num := func(keys ...string) (int64, bool) {
		for _, k := range keys {
			if v, ok := m[k]; ok {
				if n, ok := metricInt(v); ok {
					return n, true
				}
			}
		}
		return 0, false
	}
	var parts []string
	ins, hasIns := num("numTargetRowsInserted", "numOutputRows", "numInsertedRows")
	upd, hasUpd := num("numTargetRowsUpdated", "numUpdatedRows")
	del, hasDel := num("numTargetRowsDeleted", "numDeletedRows")
	if h.Operation == "RESTORE" && !hasUpd && !hasDel {
		hasIns = false // a RESTORE without row metrics (Spark's) says files, not rows
	}
	if hasUpd || hasDel {
		parts = append(parts, fmt.Sprintf("+%d ~%d -%d rows", ins, upd, del))
	} else if hasIns {
		parts = append(parts, fmt.Sprintf("+%d rows", ins))
	}
	files := func(n int64) string {
		if n == 1 {
			return "1 file"
		}
		return fmt.Sprintf("%d files", n)
	}
	if n, ok := num("numDeletedFiles", "numFilesToDelete"); ok {
		parts = append(parts, files(n)+" deleted")
	} else if n, ok := num("numTargetFilesAdded", "numFiles", "numAddedFiles"); ok {
		parts = append(parts, files(n))
	}
	if n, ok := num("numRestoredFiles"); ok {
		parts = append(parts, files(n)+" restored")
	}
	if len(parts) == 0 {
		return h.schemaSummary()
	}
	return strings.Join(parts, ", ")
}

// schemaSummary says what a schema change commit changed: each step of ours ("schema:
// add channel string; rename total from amount"), or "schema changed" for another
// writer's; "" for any other commit.
func (h HistoryEntry) schemaSummary() string {
	switch h.Operation {
	case OpAddColumns, OpChangeColumn, OpRenameColumn, OpDropColumns, "CHANGE COLUMNS", "REPLACE COLUMNS":
	default:
		return ""
	}
	raw, _ := h.OperationParameters["columns"].(string)
	var steps []map[string]string
	if json.Unmarshal([]byte(raw), &steps) != nil || len(steps) == 0 || steps[0]["operation"] == "" {
		if h.Operation == OpDropColumns && raw != "" {
			return "schema: drop " + strings.Trim(strings.ReplaceAll(raw, `"`, ""), "[]")
		}
		return "schema changed"
	}
	var out []string
	for _, s := range steps {
		verb := strings.ToLower(strings.Fields(s["operation"])[0])
		out = append(out, strings.TrimSpace(verb+" "+s["column"]+" "+s["change"]))
	}
	return "schema: " + strings.Join(out, "; ")
}

// RowCounts returns the rows a commit inserted, updated and deleted, from its operation
// metrics (Spark's, delta-rs's and ours); ok is false when it records none of them.
func (h HistoryEntry) RowCounts() (inserted, updated, deleted int64, ok bool) {
	num := func(keys ...string) (int64, bool) {
		for _, k := range keys {
			if n, ok := metricInt(h.OperationMetrics[k]); ok {
				return n, true
			}
		}
		return 0, false
	}
	ins, a := num("numTargetRowsInserted", "numOutputRows", "numInsertedRows")
	upd, b := num("numTargetRowsUpdated", "numUpdatedRows")
	del, c := num("numTargetRowsDeleted", "numDeletedRows")
	return ins, upd, del, a || b || c
}

// metricInt reads an operation metric: Spark writes decimal strings, delta-rs numbers.
func metricInt(v any) (int64, bool) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	case float64:
		return int64(v), v == float64(int64(v))
	case int64:
		return v, true
	case int:
		return int64(v), true
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
