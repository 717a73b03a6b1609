package decode

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// withBulk runs f with the bulk path on or off.
func withBulk(on bool, f func()) {
	defer func(old bool) { bulkCSV = old }(bulkCSV)
	bulkCSV = on
	f()
}

// TestCSVBulkMatchesRecordByRecord decodes generated files of every column type, clean
// and with damage of every kind the bulk path hands back (bad values, nulls where none
// may be, wrong field counts, quotes, blank lines, CRLF, null texts), with the bulk path
// on and off: the batches, rows, lines, skipped records and errors must be the same.
func TestCSVBulkMatchesRecordByRecord(t *testing.T) {
	cols := []string{"id long!", "i integer", "sm short", "ti byte", "x double", "f float", "amt decimal(10,2)",
		"big decimal(38,10)", "b boolean", "d date", "ts timestamp", "tn timestamp_ntz", "s string", "bin binary", "k string!"}
	rng := rand.New(rand.NewPCG(21, 22))
	value := func(c string) string {
		switch strings.Fields(c)[1] {
		case "long!", "integer", "short", "byte":
			return fmt.Sprint(rng.IntN(200) - 100)
		case "double", "float":
			return fmt.Sprintf("%.3f", rng.Float64()*1000)
		case "decimal(10,2)":
			return fmt.Sprintf("%d.%02d", rng.IntN(100000), rng.IntN(100))
		case "decimal(38,10)":
			return fmt.Sprintf("-%d.%d", rng.Int64(), rng.IntN(1000))
		case "boolean":
			return []string{"true", "false", "1", "0", "YES", "no"}[rng.IntN(6)]
		case "date":
			return time.Date(1900+rng.IntN(200), 1, 1+rng.IntN(365), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
		case "timestamp", "timestamp_ntz":
			layouts := []string{"2006-01-02 15:04:05", "2006-01-02", "2006-01-02T15:04:05.000000Z", "2006-01-02T15:04:05.999Z"}
			if strings.HasSuffix(c, "ntz") {
				layouts = layouts[:2] // no zone
			}
			return time.Date(1900+rng.IntN(200), 1, 1+rng.IntN(365), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e6)*1000, time.UTC).
				Format(layouts[rng.IntN(len(layouts))])
		}
		return fmt.Sprintf("v%d é", rng.IntN(1000))
	}
	damage := []func(string) string{
		func(v string) string { return v },
		func(v string) string { return "" },
		func(v string) string { return "NULL" },
		func(v string) string { return v + "x" },
		func(v string) string { return v + ",extra" },
		func(v string) string { return "\"" + v + "\"" },
		func(v string) string { return v + "\r" },
		func(v string) string { return "\xff" + v },
		func(v string) string { return "99999999999999999999" },
	}
	for n := range 30 {
		var b strings.Builder
		nulls := []string{"", "NULL"}[n%2]
		rows := 50 + rng.IntN(300)
		dirty := n%3 != 0 // a third of the files are clean
		for r := range rows {
			if dirty && rng.IntN(40) == 0 {
				b.WriteString("\n") // a blank line
			}
			for k, c := range cols {
				if k > 0 {
					b.WriteByte(',')
				}
				v := value(c)
				if rng.IntN(10) == 0 && !strings.HasSuffix(c, "!") {
					v = nulls
				}
				if dirty && rng.IntN(200) == 0 {
					v = damage[rng.IntN(len(damage))](v)
				}
				b.WriteString(v)
			}
			if r < rows-1 || rng.IntN(2) == 0 {
				b.WriteString([]string{"\n", "\r\n"}[n%2])
			}
		}
		for _, onError := range []OnError{Skip, Fail} {
			for _, par := range []int{1, 3} {
				for _, line := range []string{"", "_line"} {
					opts := Options{Schema: schema(t, cols...), BatchSize: 1 + rng.IntN(64), Parallelism: par, OnError: onError,
						LineColumn: line, CSV: CSVOptions{NoHeader: true, NullString: nulls}}
					var bulk, rowwise decoded
					withBulk(true, func() { bulk = decodeAll(t, b.String(), opts) })
					withBulk(false, func() { rowwise = decodeAll(t, b.String(), opts) })
					if fmt.Sprint(bulk.err) != fmt.Sprint(rowwise.err) || !reflect.DeepEqual(bulk.rows, rowwise.rows) ||
						!reflect.DeepEqual(bulk.batches, rowwise.batches) || !reflect.DeepEqual(bulk.bad, rowwise.bad) ||
						!reflect.DeepEqual(bulk.badRecords, rowwise.badRecords) {
						t.Fatalf("file %d (%s, par %d, line column %q): bulk and record-by-record differ:\nbulk %v%s\nbad %q\nrecord-by-record %v%s\nbad %q",
							n, onError, par, line, bulk.err, showRows(bulk.rows), bulk.bad, rowwise.err, showRows(rowwise.rows), rowwise.bad)
					}
					if !dirty && (bulk.err != nil || len(bulk.rows) != rows) {
						t.Fatalf("file %d: clean file read %d of %d rows, %v %q", n, len(bulk.rows), rows, bulk.err, bulk.bad[:min(3, len(bulk.bad))])
					}
				}
			}
		}
	}
}
