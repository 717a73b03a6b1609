package decode

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// arrowSchema maps the declared schema to Arrow with delta.ArrowSchema (the types the
// table's writer takes), after checking that column names are unique ignoring case.
func arrowSchema(st *delta.StructType) (*arrow.Schema, error) {
	seen := map[string]bool{}
	for _, f := range st.Fields {
		k := strings.ToLower(f.Name)
		if seen[k] {
			return nil, fmt.Errorf("schema: duplicate column %s (names are case-insensitive)", f.Name)
		}
		seen[k] = true
	}
	return delta.ArrowSchema(st)
}
