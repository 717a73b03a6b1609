package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// schemaResult is a table's schema at a version and the timeline of its schema
// changes, as the schema tab and GET /api/v1/tables/{name}/schema show them.
type schemaResult struct {
	Version   int64     `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	// ColumnMapping is none, name or id; with it, columns have physical names and ids.
	ColumnMapping string         `json:"column_mapping"`
	Columns       []schemaColumn `json:"columns"`
	// History lists the schema changes, oldest first: the first entry is the schema the
	// log starts with (the table's creation at version 0).
	History []schemaVersionView `json:"history"`
}

type schemaColumn struct {
	Name         string   `json:"name"` // dotted path of nested fields
	Depth        int      `json:"depth"`
	Type         string   `json:"type"`
	Nullable     bool     `json:"nullable"`
	Comment      string   `json:"comment,omitempty"`
	Identity     string   `json:"identity,omitempty"`
	Partition    bool     `json:"partition,omitempty"`
	PhysicalName string   `json:"physical_name,omitempty"`
	ID           int64    `json:"id,omitempty"`
	TypeChanges  []string `json:"type_changes,omitempty"` // "integer to long"
}

// Indent is the column's nesting as padding, for the page.
func (c schemaColumn) Indent() int { return c.Depth * 18 }

type schemaVersionView struct {
	Version   int64     `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	Operation string    `json:"operation"`
	User      string    `json:"user,omitempty"`
	Pipeline  string    `json:"pipeline,omitempty"`
	Stage     string    `json:"stage,omitempty"`
	Run       string    `json:"run,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	// First marks the schema the log starts with; Columns names its columns then.
	First   bool               `json:"first,omitempty"`
	Columns []string           `json:"columns,omitempty"`
	Changes []schemaChangeView `json:"changes"`
}

type schemaChangeView struct {
	Kind   string `json:"kind"` // added, dropped, renamed, widened, type changed, nullable, not null, comment, column mapping, partitioning
	Column string `json:"column,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Text   string `json:"text"` // the change in words
}

func schemaChangeViews(changes []delta.SchemaChange) []schemaChangeView {
	var out []schemaChangeView
	for _, c := range changes {
		out = append(out, schemaChangeView{Kind: c.Kind, Column: c.Column, From: c.From, To: c.To, Text: c.String()})
	}
	return out
}

// Class is the change's CSS class.
func (c schemaChangeView) Class() string { return "sc-" + strings.ReplaceAll(c.Kind, " ", "-") }

func (s *Server) schema(ctx context.Context, ref *tableRef, q url.Values) (*schemaResult, error) {
	version, err := optVersion(q, "version")
	if err != nil {
		return nil, err
	}
	t, err := s.mustOpen(ctx, ref)
	if err != nil {
		return nil, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	hist, err := s.tables.schemaHistory(ctx, ref, t, snap.Version())
	if err != nil {
		return nil, err
	}
	if version != nil && *version != snap.Version() {
		if snap, err = t.SnapshotAt(ctx, *version); err != nil {
			return nil, badRequestf("%v", err)
		}
	}
	res := &schemaResult{Version: snap.Version(), Timestamp: snap.Timestamp().UTC(), ColumnMapping: snap.ColumnMappingMode(),
		Columns: []schemaColumn{}, History: []schemaVersionView{}}
	for _, c := range delta.DescribeSchema(snap.Schema(), snap.PartitionColumns()) {
		sc := schemaColumn{Name: c.Path, Depth: c.Depth, Type: c.Type, Nullable: c.Nullable, Comment: c.Comment, Partition: c.Partition,
			PhysicalName: c.PhysicalName, ID: c.ID}
		if id := c.Identity; id != nil {
			sc.Identity = fmt.Sprintf("start %d, step %d", id.Start, id.Step)
		}
		for _, tc := range c.TypeChanges {
			sc.TypeChanges = append(sc.TypeChanges, tc.From+" to "+tc.To)
		}
		res.Columns = append(res.Columns, sc)
	}
	for _, h := range hist {
		v := schemaVersionView{Version: h.Version, Timestamp: h.Timestamp.UTC(), Operation: h.Operation, User: h.UserName, First: h.First,
			Changes: []schemaChangeView{}}
		if l := h.Lineage; l != nil {
			v.Pipeline, v.Stage, v.Run, v.Attempt = l.Pipeline, l.Stage, l.RunID, l.Attempt
		}
		if h.First {
			for _, f := range h.Schema.Fields {
				v.Columns = append(v.Columns, f.Name)
			}
		}
		v.Changes = append(v.Changes, schemaChangeViews(h.Changes)...)
		res.History = append(res.History, v)
	}
	return res, nil
}

// Current reports whether entry v's schema is the one shown: the last schema change at
// or before the version shown.
func (r *schemaResult) Current(v schemaVersionView) bool {
	cur := int64(-1)
	for _, h := range r.History {
		if h.Version <= r.Version {
			cur = h.Version
		}
	}
	return v.Version == cur
}

// Mapped reports whether the columns have physical names (column mapping).
func (r *schemaResult) Mapped() bool { return r.ColumnMapping != "none" && r.ColumnMapping != "" }

// schemaForm is the schema tab: the version asked for and the result.
type schemaForm struct {
	Version string
	Result  *schemaResult
}

func (s *Server) pageSchema(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "schema", "schema", func(ref *tableRef, ti *tableInfo) (any, error) {
		f := &schemaForm{Version: r.URL.Query().Get("version")}
		var err error
		f.Result, err = s.schema(r.Context(), ref, r.URL.Query())
		return f, err
	})
}

func (s *Server) apiSchema(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err == nil {
		var res *schemaResult
		if res, err = s.schema(r.Context(), ref, r.URL.Query()); err == nil {
			writeJSON(w, http.StatusOK, res)
			return
		}
	}
	s.apiError(w, r, err)
}
