package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
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
