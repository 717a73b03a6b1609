package delta

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// keptRowGroups returns the row groups of an open file that may hold a row matching the
// filter (counting the others in st), judged from the Parquet footer's column chunk statistics the way file stats
// are: nil means all of them. Only top-level integer, date, microsecond-timestamp,
// integer-backed decimal and string columns are used. A string column's statistics are
// used only from a file that declares its columns' type-defined order (its min_value and
// max_value, which compare as unsigned bytes, as strings do here; older writers ordered
// the deprecated min and max as signed bytes) and only when both are valid UTF-8; a
// writer may have cut them (a shorter min, a max cut and raised), which keeps them
// bounds. Floats (NaN) and everything else never prune.
func (s *Scanner) keptRowGroups(fr *pqarrow.FileReader, fileSchema *arrow.Schema, a *Add, st *ScanStats) ([]int, error) {
	if s.filter == nil {
		return nil, nil
	}
	md := fr.ParquetReader().MetaData()
	n := md.NumRowGroups()
	if n <= 1 {
		return nil, nil
	}
	cols := s.statsColumns(fr, fileSchema)
	if len(cols) == 0 {
		return nil, nil
	}
	var kept []int
	for rg := 0; rg < n; rg++ {
		stats, err := s.rowGroupStats(md.RowGroup(rg), cols)
		if err != nil {
			return nil, err
		}
		ok, err := s.filter.MayMatchFile(fileFacts(&Add{PartitionValues: a.PartitionValues, Stats: stats}, s.isPart))
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, rg)
		} else {
			st.RowGroupsPruned++
		}
	}
	return kept, nil
}

// statsColumn is a filter column whose row group statistics can prune.
type statsColumn struct {
	name  string // its physical name, as stats name it
	leaf  int
	scale int32
	isDec bool
}

// statsColumns lists the filter's data columns that are top-level leaves of the file
// with statistics that can prune: integers, dates, microsecond timestamps, decimals
// stored as integers, strings in type-defined order.
func (s *Scanner) statsColumns(fr *pqarrow.FileReader, fileSchema *arrow.Schema) []statsColumn {
	md := fr.ParquetReader().MetaData()
	var cols []statsColumn
	for _, name := range s.filter.Columns() {
		if s.isPart[strings.ToLower(name)] {
			continue
		}
		sf := s.schema.Field(name)
		if sf == nil {
			continue
		}
		if i := fileField(fileSchema.Fields(), sf); i >= 0 && fr.Manifest.Fields[i].IsLeaf() {
			f := fileSchema.Field(i)
			// Keyed as file stats are: by physical name (column mapping).
			c := statsColumn{name: physicalName(sf), leaf: fr.Manifest.Fields[i].ColIndex}
			usable := false
			switch t := f.Type.(type) {
			case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type, *arrow.Date32Type:
				usable = true
			case *arrow.TimestampType:
				usable = t.Unit == arrow.Microsecond
			case *arrow.Decimal128Type:
				c.isDec, c.scale = true, t.Scale
				phys := md.Schema.Column(c.leaf).PhysicalType()
				usable = phys == parquet.Types.Int32 || phys == parquet.Types.Int64
			case *arrow.StringType, *arrow.LargeStringType:
				col := md.Schema.Column(c.leaf)
				usable = col.PhysicalType() == parquet.Types.ByteArray && col.ColumnOrder() == parquet.ColumnOrders.TypeDefinedOrder
			}
			if usable {
				cols = append(cols, c)
			}
		}
	}
	return cols
}

// rowGroupStats writes a row group's statistics of cols as a data file's stats JSON
// (numRecords, minValues, maxValues, nullCount), so the file filter can judge it.
func (s *Scanner) rowGroupStats(rgmd *metadata.RowGroupMetaData, cols []statsColumn) (string, error) {
	var mins, maxs, nulls bytes.Buffer
	for _, c := range cols {
		cc, err := rgmd.ColumnChunk(c.leaf)
		if err != nil {
			return "", err
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
		case *metadata.ByteArrayStatistics:
			mn, mx := ts.Min(), ts.Max()
			if !utf8.Valid(mn) || !utf8.Valid(mx) {
				continue
			}
			jmn, _ := json.Marshal(string(mn))
			jmx, _ := json.Marshal(string(mx))
			appendJSONField(&mins, key, string(jmn))
			appendJSONField(&maxs, key, string(jmx))
			continue
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
	return `{"numRecords":` + strconv.FormatInt(rgmd.NumRows(), 10) +
		`,"minValues":{` + mins.String() + `},"maxValues":{` + maxs.String() + `},"nullCount":{` + nulls.String() + `}}`, nil
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
