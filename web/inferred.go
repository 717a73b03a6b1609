package web

import (
	"context"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// inferredView is a dimension's inferred members: the placeholder versions fact_loads
// added for business keys facts named before the dimension had them (flagged in the
// scd2_merge's columns.inferred); its merge fills each in place when the key arrives.
type inferredView struct {
	Column  string           `json:"column"`
	Keys    []string         `json:"keys"`
	Count   int64            `json:"count"`
	Members []inferredMember `json:"members"` // the first maxInferredShown
}

type inferredMember struct {
	Key          string `json:"key"`
	SurrogateKey string `json:"surrogate_key"`
}

const maxInferredShown = 100

// inferred reads the table's inferred members when an scd2_merge of its pipeline flags
// them (nil otherwise): the rows whose flag is true in the current version.
func (s *Server) inferred(ctx context.Context, ref *tableRef) (*inferredView, error) {
	var merge *jobs.SCD2Config
	for _, st := range ref.spec.Stages {
		if m, ok := st.Config.(*jobs.SCD2Config); ok && m.Target == ref.Name && m.Columns.Inferred != "" {
			merge = m
		}
	}
	if merge == nil {
		return nil, nil
	}
	t, ok, err := s.tables.open(ctx, ref)
	if err != nil || !ok {
		return nil, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	cols := append([]string{merge.Columns.Inferred}, merge.Keys...)
	if merge.Columns.SurrogateKey != "" {
		cols = append(cols, merge.Columns.SurrogateKey)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	v := &inferredView{Column: merge.Columns.Inferred, Keys: merge.Keys, Members: []inferredMember{}}
	nk := len(merge.Keys)
	for sc.Next() {
		rec := sc.RecordBatch()
		flag := rec.Column(0)
		for r := range int(rec.NumRows()) {
			if flag.IsNull(r) || flag.ValueStr(r) != "true" {
				continue
			}
			v.Count++
			if len(v.Members) == maxInferredShown {
				continue
			}
			parts := make([]string, nk)
			for k := range nk {
				parts[k] = rec.Column(1 + k).ValueStr(r)
			}
			m := inferredMember{Key: strings.Join(parts, ", ")}
			if int(rec.NumCols()) > 1+nk {
				m.SurrogateKey = rec.Column(1 + nk).ValueStr(r)
			}
			v.Members = append(v.Members, m)
		}
	}
	return v, sc.Err()
}
