package delta

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// keptRowGroups returns the row groups of an open file that may hold a row matching the
// filter, judged from the Parquet footer's column chunk statistics the way file stats
// are: nil means all of them. Only top-level integer, date, microsecond-timestamp and
// integer-backed decimal columns are used; their Parquet min/max are exact. Strings
// (whose statistics older writers ordered as signed bytes), floats (NaN) and everything
// else never prune.
func (s *Scanner) keptRowGroups(fr *pqarrow.FileReader, fileSchema *arrow.Schema, a *Add) ([]int, error) {
	if s.filter == nil {
		return nil, nil
	}
	md := fr.ParquetReader().MetaData()
	n := md.NumRowGroups()
	if n <= 1 {
		return nil, nil
	}
	type col struct {
		name   string
		leaf   int
		scale  int32
		isDec  bool
		usable bool
	}
	var cols []col
	for _, name := range s.filter.columns() {
		if s.isPart[strings.ToLower(name)] {
			continue
		}
		for i, f := range fileSchema.Fields() {
			if !strings.EqualFold(f.Name, name) || !fr.Manifest.Fields[i].IsLeaf() {
				continue
			}
			c := col{name: s.schema.Field(name).Name, leaf: fr.Manifest.Fields[i].ColIndex}
			switch t := f.Type.(type) {
			case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type, *arrow.Date32Type:
				c.usable = true
			case *arrow.TimestampType:
				c.usable = t.Unit == arrow.Microsecond
			case *arrow.Decimal128Type:
				c.isDec, c.scale = true, t.Scale
				phys := md.Schema.Column(c.leaf).PhysicalType()
				c.usable = phys == parquet.Types.Int32 || phys == parquet.Types.Int64
			}
			if c.usable {
				cols = append(cols, c)
			}
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	var kept []int
	for rg := 0; rg < n; rg++ {
		rgmd := md.RowGroup(rg)
		var mins, maxs, nulls bytes.Buffer
		for _, c := range cols {
			cc, err := rgmd.ColumnChunk(c.leaf)
			if err != nil {
				return nil, err
			}
			if ok, _ := cc.StatsSet(); !ok {
				continue
			}
			st, err := cc.Statistics()
			if err != nil || st == nil {
				continue
			}
			key, _ := json.Marshal(c.name)
			if st.HasNullCount() {
				appendJSONField(&nulls, key, strconv.FormatInt(st.NullCount(), 10))
			}
			if !st.HasMinMax() {
				continue
			}
			var lo, hi int64
			switch ts := st.(type) {
			case *metadata.Int32Statistics:
				lo, hi = int64(ts.Min()), int64(ts.Max())
			case *metadata.Int64Statistics:
				lo, hi = ts.Min(), ts.Max()
			default:
				continue
			}
			lit := func(v int64) string {
				if c.isDec {
					return decimal128.FromI64(v).ToString(c.scale)
				}
				return strconv.FormatInt(v, 10)
			}
			// Dates and timestamps go through their stats text forms.
			switch f := s.schema.Field(c.name).Type.(type) {
			case *PrimitiveType:
				switch f.Name {
				case TypeDate:
					appendJSONField(&mins, key, strconv.Quote(dateString(lo)))
					appendJSONField(&maxs, key, strconv.Quote(dateString(hi)))
					continue
				case TypeTimestamp, TypeTimestampNTZ:
					// Exact microseconds: the reader's +999µs widening of ms stats is harmless.
					appendJSONField(&mins, key, strconv.Quote(microString(lo)))
					appendJSONField(&maxs, key, strconv.Quote(microString(hi)))
					continue
				}
			}
			appendJSONField(&mins, key, lit(lo))
			appendJSONField(&maxs, key, lit(hi))
		}
		stats := `{"numRecords":` + strconv.FormatInt(rgmd.NumRows(), 10) +
			`,"minValues":{` + mins.String() + `},"maxValues":{` + maxs.String() + `},"nullCount":{` + nulls.String() + `}}`
		ok, err := s.filter.mayMatchFile(&Add{PartitionValues: a.PartitionValues, Stats: stats}, s.isPart)
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, rg)
		} else {
			s.stats.RowGroupsPruned++
		}
	}
	return kept, nil
}

func appendJSONField(b *bytes.Buffer, key []byte, val string) {
	if b.Len() > 0 {
		b.WriteByte(',')
	}
	b.Write(key)
	b.WriteByte(':')
	b.WriteString(val)
}

func dateString(days int64) string {
	return arrow.Date32(days).ToTime().UTC().Format("2006-01-02")
}

func microString(us int64) string {
	return arrow.Timestamp(us).ToTime(arrow.Microsecond).UTC().Format("2006-01-02T15:04:05.999999Z")
}
