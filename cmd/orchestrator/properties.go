package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func propertiesCommand() *command {
	return &command{
		name:    "properties",
		args:    "TABLE",
		summary: "show or change a table's properties",
		help: "Show a table's properties (metaData.configuration), or change them: --set adds or\n" +
			"replaces a property, --unset removes one; both repeat. A change is one commit\n" +
			"(SET TBLPROPERTIES or UNSET TBLPROPERTIES, as ALTER TABLE writes); the properties\n" +
			"after it are printed, and the new version is reported on stderr.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var set, unset listFlag
			fs.Var(&set, "set", "set property `key=value` (repeatable)")
			fs.Var(&unset, "unset", "remove property `key` (repeatable)")
			return func(ctx context.Context, e *env, args []string) error {
				setMap := make(map[string]string, len(set.values))
				for _, kv := range set.values {
					k, v, ok := strings.Cut(kv, "=")
					if k = strings.TrimSpace(k); !ok || k == "" {
						return usagef("--set %q: want key=value", kv)
					}
					setMap[k] = v
				}
				for _, k := range unset.values {
					if _, ok := setMap[k]; ok {
						return usagef("property %q is both set and unset", k)
					}
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				if len(setMap) > 0 || len(unset.values) > 0 {
					v, err := t.table.SetProperties(ctx, setMap, unset.values)
					if err != nil {
						return err
					}
					fmt.Fprintf(e.stderr, "table %s: properties changed in version %d\n", t.name, v)
				}
				snap, err := t.table.Snapshot(ctx)
				if err != nil {
					return err
				}
				props := snap.Properties()
				rows := make([][]cell, 0, len(props))
				for _, k := range sortedKeys(props) {
					rows = append(rows, []cell{rowtext.Text(k), rowtext.Text(props[k])})
				}
				return writeRows(e, tf.format, []column{{name: "key"}, {name: "value"}}, rows)
			}
		},
	}
}
