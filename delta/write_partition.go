package delta

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// HiveDefaultPartition is the directory value Spark and Hive use for a null partition value.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// partitionValueString serializes the partition value at row i of arr as
// PROTOCOL.md §Partition Value Serialization says; ok is false for null. An empty string
// is null too, as in Spark.
func partitionValueString(arr arrow.Array, i int) (string, bool, error) {
	if arr.IsNull(i) {
		return "", false, nil
	}
	switch a := arr.(type) {
	case *array.String:
		v := a.Value(i)
		return v, v != "", nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), true, nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	case *array.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	case *array.Int8:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i)), true, nil
	case *array.Float64:
		return formatPartitionFloat(a.Value(i), 64), true, nil
	case *array.Float32:
		return formatPartitionFloat(float64(a.Value(i)), 32), true, nil
	case *array.Date32:
		return a.Value(i).ToTime().UTC().Format("2006-01-02"), true, nil
	case *array.Timestamp:
		ts := a.DataType().(*arrow.TimestampType)
		t := time.UnixMicro(int64(a.Value(i))).UTC()
		if ts.TimeZone == "" {
			return t.Format("2006-01-02 15:04:05.999999"), true, nil
		}
		return t.Format("2006-01-02T15:04:05.000000Z"), true, nil
	case *array.Decimal128:
		dt := a.DataType().(*arrow.Decimal128Type)
		return a.Value(i).ToString(dt.Scale), true, nil
	}
	return "", false, fmt.Errorf("type %s cannot be a partition column", arr.DataType())
}

func formatPartitionFloat(v float64, bits int) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(v, 'f', -1, bits)
	if !strings.ContainsAny(s, ".") {
		s += ".0" // as Java's Double.toString prints integral values
	}
	return s
}

// hiveEscape escapes a partition value for a directory name as Hive and Spark do
// (FileUtils.escapePathName): control characters and "#%'*/:=?\{[]^ and DEL become %XX.
func hiveEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// partitionDir is the Hive-style relative directory for a partition, e.g. "country=US/d=2024-01-01".
func partitionDir(cols []string, vals []*string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		v := HiveDefaultPartition
		if vals[i] != nil {
			v = hiveEscape(*vals[i])
		}
		parts[i] = hiveEscape(c) + "=" + v
	}
	return strings.Join(parts, "/")
}

// encodePath renders a relative path (as on storage) as the URI the add action stores:
// each segment percent-encoded (a space becomes %20, % becomes %25).
func encodePath(rel string) string {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
