package main

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// How Arrow values are shown: package rowtext renders them, the same for the web. Every
// rendering is exact: decimals keep their scale ("12.50"), timestamps are RFC 3339 in UTC
// with as many fractional digits as they need ("2026-01-14T09:30:00.25Z"; a timestamp_ntz
// has no zone: "2026-01-14T09:30:00"), dates are YYYY-MM-DD, binary is base64, and
// structs, lists and maps are JSON. In JSON output integers and decimals are numbers
// written with all their digits, NaN and infinities strings.
const timestampLayout = rowtext.TimestampLayout

// numericType reports whether a column of this type is right-aligned in text output.
func numericType(t arrow.DataType) bool { return rowtext.Numeric(t) }

// arrowCell renders row i of arr.
func arrowCell(arr arrow.Array, i int) cell {
	v := rowtext.At(arr, i)
	if v.Null {
		return nullCell
	}
	return cell{text: v.Text, json: v.JSON}
}

func intCell(v int64) cell {
	s := strconv.FormatInt(v, 10)
	return cell{text: s, json: json.Number(s)}
}

// formatTime renders an instant as RFC 3339 in UTC (history timestamps, --timestamp).
func formatTime(t time.Time) string {
	return t.UTC().Format(timestampLayout)
}
