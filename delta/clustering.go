package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Clustered tables (PROTOCOL.md, Clustered Table): the clustering writer feature, with
// the clustering columns in the delta.clustering metadata domain. This package writes to
// such tables as any writer that does not cluster data may: it keeps every domain as it
// is (commits never touch them, checkpoints carry them) and checks that each file it
// adds has statistics on the clustering columns; it leaves clusteringProvider unset on
// the files it writes (they are unclustered files).

const (
	// FeatureClustering is the clustered table writer feature.
	FeatureClustering = "clustering"
	// clusteringDomain is the metadata domain of the clustering columns.
	clusteringDomain = "delta.clustering"
)

// ClusteringColumns returns the table's clustering columns, dotted names of logical
// column paths (Spark writes {"clusteringColumns":[["id"],["s","a"]]}), or nil when the
// table is not clustered.
func (s *Snapshot) ClusteringColumns() ([]string, error) {
	conf, ok := s.DomainMetadata(clusteringDomain)
	if !ok {
		return nil, nil
	}
	var v struct {
		ClusteringColumns []json.RawMessage `json:"clusteringColumns"`
	}
	if err := json.Unmarshal([]byte(conf), &v); err != nil {
		return nil, fmt.Errorf("domain %s: %w", clusteringDomain, err)
	}
	out := make([]string, 0, len(v.ClusteringColumns))
	for _, raw := range v.ClusteringColumns {
		var parts []string
		if err := json.Unmarshal(raw, &parts); err != nil {
			// The protocol's example spells a column as one string.
			var name string
			if err2 := json.Unmarshal(raw, &name); err2 != nil {
				return nil, fmt.Errorf("domain %s: clustering column %s: want a list of names or a name", clusteringDomain, raw)
			}
			parts = []string{name}
		}
		out = append(out, strings.Join(parts, "."))
	}
	return out, nil
}

// checkClusteringStats checks that an add's statistics cover every clustering column
// (a nullCount for it, which every stats writer records for a column it indexes).
func checkClusteringStats(a *Add, cols []string) error {
	if len(cols) == 0 {
		return nil
	}
	var st struct {
		NullCount map[string]any `json:"nullCount"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(a.Stats)))
	dec.UseNumber()
	if a.Stats == "" || dec.Decode(&st) != nil {
		return fmt.Errorf("add %s: a clustered table needs statistics on its clustering columns %v, and the file has none", a.Path, cols)
	}
	for _, c := range cols {
		var node any = st.NullCount
		for _, part := range strings.Split(c, ".") {
			m, ok := node.(map[string]any)
			if !ok {
				node = nil
				break
			}
			node = m[part]
		}
		if node == nil {
			return fmt.Errorf("add %s: no statistics on clustering column %s (a clustered table needs them; is it beyond delta.dataSkippingNumIndexedCols?)", a.Path, c)
		}
	}
	return nil
}

// CheckClusterBy checks the clustering columns a table declaration gives, as Create will
// (columns of the schema, of types with statistics, within the statistics columns of
// properties, at most four, and no partition columns).
func CheckClusterBy(schema *StructType, cols, partitionColumns []string, properties map[string]string) error {
	_, err := clusteringDomainOf(schema, cols, partitionColumns, properties)
	return err
}

// maxClusteringColumns is Delta-Spark's limit on clustering columns.
const maxClusteringColumns = 4

// clusteringDomainOf validates the clustering columns of a new table and returns its
// delta.clustering domain (nil when not clustered): each column exists, is of a type
// with min/max statistics, and is within the columns that get statistics
// (delta.dataSkippingNumIndexedCols, default 32); at most four; no partition columns.
func clusteringDomainOf(schema *StructType, cols, partitionColumns []string, config map[string]string) (*DomainMetadata, error) {
	if len(cols) == 0 {
		return nil, nil
	}
	if len(partitionColumns) > 0 {
		return nil, fmt.Errorf("cluster by %v: a table is partitioned or clustered, not both (partition columns %v)", cols, partitionColumns)
	}
	if len(cols) > maxClusteringColumns {
		return nil, fmt.Errorf("cluster by %v: at most %d clustering columns", cols, maxClusteringColumns)
	}
	indexed := DefaultNumIndexedCols
	if v, ok := config["delta.dataSkippingNumIndexedCols"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			indexed = n
		}
	}
	leaves := leafColumns(schema)
	paths := make([][]string, 0, len(cols))
	seen := map[string]bool{}
	for _, c := range cols {
		i := slices.IndexFunc(leaves, func(l leafColumn) bool { return strings.EqualFold(l.name, c) })
		if i < 0 {
			return nil, fmt.Errorf("cluster by: column %q is not a column of the table (nested fields as a.b)", c)
		}
		l := leaves[i]
		switch t := l.typ.(type) {
		case *DecimalType:
		case *PrimitiveType:
			if t.Name == TypeBoolean || t.Name == TypeBinary || t.Name == TypeVariant {
				return nil, fmt.Errorf("cluster by: column %s has type %s, which has no min/max statistics to cluster on", l.name, t.Name)
			}
		default:
			return nil, fmt.Errorf("cluster by: column %s has type %s; clustering columns are primitive", l.name, l.typ)
		}
		if indexed >= 0 && i >= indexed {
			return nil, fmt.Errorf("cluster by: column %s is leaf column %d, beyond the %d that get statistics (delta.dataSkippingNumIndexedCols)", l.name, i+1, indexed)
		}
		if seen[strings.ToLower(l.name)] {
			return nil, fmt.Errorf("cluster by: column %s is listed twice", l.name)
		}
		seen[strings.ToLower(l.name)] = true
		paths = append(paths, l.path)
	}
	b, err := json.Marshal(struct {
		ClusteringColumns [][]string `json:"clusteringColumns"`
		DomainName        string     `json:"domainName"`
	}{paths, clusteringDomain})
	if err != nil {
		return nil, err
	}
	return &DomainMetadata{Domain: clusteringDomain, Configuration: string(b)}, nil
}

// leafColumn is a column that gets statistics, in the order stats count them.
type leafColumn struct {
	name string   // dotted
	path []string // field names from the top
	typ  DataType
}

// leafColumns lists the schema's leaf columns depth first, as the statistics writer
// counts them against delta.dataSkippingNumIndexedCols (arrays and maps are leaves).
func leafColumns(st *StructType) []leafColumn {
	var out []leafColumn
	var walk func(prefix []string, t *StructType)
	walk = func(prefix []string, t *StructType) {
		for _, f := range t.Fields {
			p := append(slices.Clone(prefix), f.Name)
			if s, ok := f.Type.(*StructType); ok {
				walk(p, s)
				continue
			}
			out = append(out, leafColumn{name: strings.Join(p, "."), path: p, typ: f.Type})
		}
	}
	walk(nil, st)
	return out
}

// clusterByParam is the CREATE TABLE commitInfo's clusterBy parameter, as Spark writes
// it (a JSON list of the column names).
func clusterByParam(cols []string) string {
	b, _ := json.Marshal(cols)
	return string(b)
}
