package decode

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// arrowSchema maps the declared schema to Arrow with dschema.ArrowSchema (the types the
// table's writer takes), after checking that column names are unique ignoring case.
func arrowSchema(st *dschema.StructType) (*arrow.Schema, error) {
	seen := map[string]bool{}
	for _, f := range st.Fields {
		k := strings.ToLower(f.Name)
		if seen[k] {
			return nil, fmt.Errorf("schema: duplicate column %s (names are case-insensitive)", f.Name)
		}
		seen[k] = true
	}
	return dschema.ArrowSchema(st)
}

// checkMissing applies the missing-column rule to the declared columns a file lacks
// (present[i] false; what says where they are missing from: "header", "file"). It returns
// the columns to fill with nulls, and a problem naming every column that makes the file
// an error: all missing ones, or with allow only those that are not nullable.
func checkMissing(st *dschema.StructType, present []bool, opts *Options, what string) (fill []string, problem string) {
	var names []string
	required := false
	for i, f := range st.Fields {
		if present[i] {
			continue
		}
		if f.Nullable && (opts.AllowMissingColumns || slices.ContainsFunc(opts.AddedLater, func(c string) bool { return strings.EqualFold(c, f.Name) })) {
			fill = append(fill, f.Name)
			continue
		}
		if f.Nullable {
			names = append(names, fmt.Sprintf("%s (%s)", f.Name, f.Type))
		} else {
			names = append(names, fmt.Sprintf("%s (%s, not nullable)", f.Name, f.Type))
			required = true
		}
	}
	if len(names) == 0 {
		return fill, ""
	}
	noun, them := "column", "it"
	if len(names) > 1 {
		noun, them = "columns", "them"
	}
	problem = fmt.Sprintf("%s lacks the declared %s %s; add %s to the file", what, noun, strings.Join(names, ", "), them)
	if required {
		problem += " (allow_missing_columns fills only nullable columns with NULL)"
	} else {
		problem += ", or set allow_missing_columns: true on the stage to fill " + them + " with NULL"
	}
	return nil, problem
}
