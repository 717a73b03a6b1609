package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// shopPipeline is a pipeline of one column-mapped table filled by an upsert ingest;
// {{columns}} is replaced by the table's columns.
const shopPipeline = `pipeline: shop
warehouse: ./warehouse
tables:
  shop.orders:
    columns:
{{columns}}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties:
      delta.columnMapping.mode: name
      delta.enableChangeDataFeed: true
stages:
  - name: ingest_orders
    kind: ingest
    source: landing/*.csv
    target: shop.orders
    mode: upsert
    keys: [order_id]
`

// shop is a directory holding the shop pipeline and its landing files.
type shop struct {
	t        *testing.T
	dir      string
	pipeline string
}

func newShop(t *testing.T) *shop {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "landing"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &shop{t: t, dir: dir, pipeline: filepath.Join(dir, "pipeline.yaml")}
}

// declare writes the pipeline with these column lines.
func (s *shop) declare(columns ...string) {
	s.t.Helper()
	for i, c := range columns {
		columns[i] = "      - " + c
	}
	yaml := strings.Replace(shopPipeline, "{{columns}}", strings.Join(columns, "\n"), 1)
	if err := os.WriteFile(s.pipeline, []byte(yaml), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// land drops a CSV file in the landing directory.
func (s *shop) land(name, csv string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "landing", name), []byte(csv), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// run runs the pipeline and wants success.
func (s *shop) run() {
	s.t.Helper()
	if r := runCLI(s.t, "run", s.pipeline); r.code != 0 {
		s.t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// cli runs a table command on shop.orders and wants exit code want.
func (s *shop) cli(want int, args ...string) result {
	s.t.Helper()
	args = append(args, "--pipeline", s.pipeline, "shop.orders")
	r := runCLI(s.t, args...)
	if r.code != want {
		s.t.Fatalf("orchestrator %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// jsonLines decodes JSON Lines output.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		rows = append(rows, m)
	}
	return rows
}

// latestVersion is the table's newest version, from table history.
func (s *shop) latestVersion() int64 {
	s.t.Helper()
	rows := jsonLines(s.t, s.cli(0, "table", "history", "--limit", "1", "--format", "json").stdout)
	return int64(rows[0]["version"].(float64))
}

// A column-mapped table evolves over four runs and one table alter: a column renamed
// (renamed_from) and one widened (int to bigint, decimal(10,2) to decimal(14,2)), a
// column added, then dropped: the run refuses the table once the YAML no longer declares
// the column, table alter --dry-run commits nothing, table alter drops it in one commit,
// and the next run goes on. table schema shows each version's own schema (physical
// names and ids that stay with a renamed column, the widenings); --timestamp picks the
// version of a time; --history lists each change with the run that made it, the drop
// with the user who ran table alter; table show reads every version in its schema.
func TestTableSchemaAndAlter(t *testing.T) {
	s := newShop(t)
	s.declare(
		"{name: order_id, type: string, nullable: false}",
		"{name: customer, type: string}",
		"{name: qty, type: int}",
		"{name: amount, type: \"decimal(10,2)\"}",
	)
	s.land("1.csv", "order_id,customer,qty,amount\nA,ann,1,1.50\nB,bob,2,20.00\n")
	s.run()
	created := s.latestVersion()

	s.declare(
		"{name: order_id, type: string, nullable: false}",
		"{name: customer_name, type: string, renamed_from: customer}",
		"{name: qty, type: bigint}",
		"{name: amount, type: \"decimal(14,2)\"}",
	)
	s.land("2.csv", "order_id,customer_name,qty,amount\nC,cy,3000000000,123456789.99\n")
	s.run()
	evolved := s.latestVersion()

	s.declare(
		"{name: order_id, type: string, nullable: false}",
		"{name: customer_name, type: string, renamed_from: customer}",
		"{name: qty, type: bigint}",
		"{name: amount, type: \"decimal(14,2)\"}",
		"{name: channel, type: string}",
	)
	s.land("3.csv", "order_id,customer_name,qty,amount,channel\nD,dee,4,4.00,web\n")
	s.run()
	withChannel := s.latestVersion()

	// The schema of each version, in its own names and types.
	schemaAt := func(v int64) []map[string]any {
		return jsonLines(t, s.cli(0, "table", "schema", "--version", fmt.Sprint(v), "--format", "json").stdout)
	}
	col := func(rows []map[string]any, name string) map[string]any {
		for _, r := range rows {
			if r["column"] == name {
				return r
			}
		}
		return nil
	}
	first, second := schemaAt(created), schemaAt(evolved)
	c0, c1 := col(first, "customer"), col(second, "customer_name")
	if c0 == nil || c1 == nil || col(second, "customer") != nil {
		t.Fatalf("customer at v%d: %v; customer_name at v%d: %v", created, first, evolved, second)
	}
	if p, _ := c0["physical_name"].(string); !strings.HasPrefix(p, "col-") || c1["physical_name"] != p || c0["id"] != c1["id"] || c0["id"] == nil {
		t.Errorf("the renamed column's physical name and id: %v before, %v after; want one physical name col-UUID and one id", c0, c1)
	}
	if q0, q1 := col(first, "qty"), col(second, "qty"); q0["type"] != "integer" || q1["type"] != "long" || q0["type_changes"] != nil ||
		fmt.Sprint(q1["type_changes"]) != "[map[from:integer to:long]]" {
		t.Errorf("qty: %v at v%d, %v at v%d; want integer, then long widened from integer", q0, created, q1, evolved)
	}
	if a := col(second, "amount"); a["type"] != "decimal(14,2)" || a["nullable"] != true {
		t.Errorf("amount at v%d: %v", evolved, a)
	}
	text := s.cli(0, "table", "schema", "--version", fmt.Sprint(evolved)).stdout
	for _, want := range []string{"physical_name", "type_changes", "customer_name", "integer to long", "decimal(10,2) to decimal(14,2)"} {
		if !strings.Contains(text, want) {
			t.Errorf("table schema --version %d lacks %q:\n%s", evolved, want, text)
		}
	}

	// The YAML drops channel: the run refuses the table until table alter drops it.
	s.declare(
		"{name: order_id, type: string, nullable: false}",
		"{name: customer_name, type: string}",
		"{name: qty, type: bigint}",
		"{name: amount, type: \"decimal(14,2)\"}",
	)
	if r := runCLI(t, "run", s.pipeline); r.code != 1 || !strings.Contains(r.stderr, "orchestrator table alter shop.orders --pipeline "+s.pipeline+" --drop-column channel") {
		t.Fatalf("run with channel gone from the YAML: exit %d, want 1 and the table alter to run\n%s%s", r.code, r.stdout, r.stderr)
	}
	if v := s.latestVersion(); v != withChannel {
		t.Fatalf("the refused run committed version %d", v)
	}
	r := s.cli(0, "table", "alter", "--drop-column", "channel", "--dry-run")
	if !strings.Contains(r.stderr, "would drop column channel") || !strings.Contains(r.stderr, "nothing committed") || !strings.Contains(r.stdout, "channel") {
		t.Errorf("dry run: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if v := s.latestVersion(); v != withChannel {
		t.Fatalf("--dry-run committed version %d", v)
	}
	r = s.cli(0, "table", "alter", "--drop-column", "channel")
	dropped := withChannel + 1
	if want := fmt.Sprintf("table shop.orders: column channel dropped in version %d", dropped); !strings.Contains(r.stderr, want) {
		t.Errorf("alter: stderr %q, want %q", r.stderr, want)
	}
	if v := s.latestVersion(); v != dropped {
		t.Fatalf("after alter: version %d, want %d (one commit)", v, dropped)
	}
	s.land("4.csv", "order_id,customer_name,qty,amount\nA,ann,5,1.50\n")
	s.run()

	// Every version reads in its own schema.
	show := func(v int64) string {
		return s.cli(0, "table", "show", "--version", fmt.Sprint(v), "--format", "csv", "--order-by", "order_id").stdout
	}
	if got := show(created); !strings.HasPrefix(got, "order_id,customer,qty,amount,") || !strings.Contains(got, "A,ann,1,1.50,") {
		t.Errorf("v%d:\n%s", created, got)
	}
	if got := show(withChannel); !strings.HasPrefix(got, "order_id,customer_name,qty,amount,source_file,load_timestamp,channel\n") ||
		!strings.Contains(got, "C,cy,3000000000,123456789.99,") || !strings.Contains(got, "2.csv,2026-02-01T12:00:00Z,\n") || !strings.Contains(got, "3.csv,2026-02-01T12:00:00Z,web\n") {
		t.Errorf("v%d:\n%s", withChannel, got)
	}
	if got := show(dropped); strings.Contains(got, "channel") || !strings.Contains(got, "D,dee,4,4.00,") {
		t.Errorf("v%d:\n%s", dropped, got)
	}

	// The diff of the first and the latest version pairs customer with customer_name.
	r = s.cli(0, "table", "diff", "--from", fmt.Sprint(created), "--format", "csv")
	if !strings.Contains(r.stderr, fmt.Sprintf("column customer of v%d is customer_name in v%d (renamed)", created, dropped+1)) ||
		!strings.Contains(r.stdout, "changed,A,ann,5,1.50,") || !strings.Contains(r.stdout, "qty: 1 → 5") || strings.Contains(r.stdout, "amount:") {
		t.Errorf("table diff across the rename and widenings:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}

	// --history: each change with its run; the drop with its user.
	hist := jsonLines(t, s.cli(0, "table", "schema", "--history", "--format", "json").stdout)
	runOf := map[int64]string{}
	for _, h := range jsonLines(t, s.cli(0, "table", "history", "--format", "json").stdout) {
		if run, ok := h["run"].(string); ok {
			runOf[int64(h["version"].(float64))] = run
		}
	}
	var got []string
	for _, h := range hist {
		v := int64(h["version"].(float64))
		line := fmt.Sprintf("v%d %v: %v", v, h["operation"], h["change"])
		switch {
		case h["run"] != nil && h["run"] == runOf[v]:
			line += " [its run]"
		case h["run"] != nil:
			line += fmt.Sprintf(" [run %v, but table history says %q]", h["run"], runOf[v])
		case h["user"] != nil:
			line += " [a user]"
		}
		got = append(got, line)
	}
	want := []string{
		fmt.Sprintf("v0 CREATE TABLE: created with 6 columns: order_id, customer, qty, amount, source_file, load_timestamp [its run]"),
		fmt.Sprintf("v%d CHANGE COLUMNS: renamed customer to customer_name [its run]", evolved-1),
		fmt.Sprintf("v%d CHANGE COLUMNS: widened qty from integer to long [its run]", evolved-1),
		fmt.Sprintf("v%d CHANGE COLUMNS: widened amount from decimal(10,2) to decimal(14,2) [its run]", evolved-1),
		fmt.Sprintf("v%d ADD COLUMNS: added channel (string) [its run]", withChannel-1),
		fmt.Sprintf("v%d DROP COLUMNS: dropped channel [a user]", dropped),
	}
	if !slices.Equal(got, want) {
		t.Errorf("table schema --history:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	text = s.cli(0, "table", "schema", "--history").stdout
	for _, want := range []string{"shop/ingest_orders", "renamed customer to customer_name", "DROP COLUMNS"} {
		if !strings.Contains(text, want) {
			t.Errorf("table schema --history lacks %q:\n%s", want, text)
		}
	}

	// --timestamp picks the version current at a time: pin the commit times an hour apart.
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	logs, err := filepath.Glob(filepath.Join(s.dir, "warehouse", "shop", "orders", "_delta_log", "*.json"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("commit files: %v %v", logs, err)
	}
	for i, f := range logs {
		at := base.Add(time.Duration(i) * time.Hour)
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
	}
	at := base.Add(time.Duration(evolved)*time.Hour + 30*time.Minute).Format(time.RFC3339)
	r = s.cli(0, "table", "schema", "--timestamp", at, "--format", "csv")
	if !strings.Contains(r.stdout, "customer_name,string") || strings.Contains(r.stdout, "channel") || !strings.Contains(r.stderr, fmt.Sprintf("version %d", evolved)) {
		t.Errorf("table schema --timestamp %s: stdout\n%s\nstderr %s", at, r.stdout, r.stderr)
	}
}

// table alter refuses, committing nothing: a table without column mapping (naming the
// property that turns it on), a column a stage needs (naming the stage), a column the
// pipeline still declares, one the table lacks, a partition column.
func TestTableAlterRefuses(t *testing.T) {
	unsetEnv(t, "ORCH_WAREHOUSE")
	pipeline := copyExample(t)
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	s := newShop(t)
	s.declare("{name: order_id, type: string, nullable: false}", "{name: customer, type: string}")
	s.land("1.csv", "order_id,customer\nA,ann\n")
	s.run()
	before := s.latestVersion()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"without column mapping", []string{"table", "alter", "--pipeline", pipeline, "sales.customer", "--drop-column", "city"},
			"dropping a column needs column mapping, which the table does not have (its files name their columns by their names): set delta.columnMapping.mode: name first"},
		{"a key", []string{"table", "alter", "--pipeline", s.pipeline, "shop.orders", "--drop-column", "order_id"},
			"column order_id is used by stage ingest_orders (keys) of pipeline shop"},
		{"still declared", []string{"table", "alter", "--pipeline", s.pipeline, "shop.orders", "--drop-column", "Customer"},
			"column customer is still declared in " + s.pipeline + " (under tables: shop.orders: columns:): the declaration is the truth, so remove the column from the YAML first"},
		{"no such column", []string{"table", "alter", "--pipeline", s.pipeline, "shop.orders", "--drop-column", "channel"},
			"no column channel (the table has order_id, customer, source_file, load_timestamp)"},
		{"dry run refuses too", []string{"table", "alter", "--pipeline", s.pipeline, "shop.orders", "--drop-column", "order_id", "--dry-run"},
			"column order_id is used by stage ingest_orders"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.args...)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", r.code, r.stdout, r.stderr, c.want)
			}
		})
	}
	if v := s.latestVersion(); v != before {
		t.Errorf("refused alters committed: version %d, want %d", v, before)
	}
	if r := runCLI(t, "table", "alter", "--pipeline", s.pipeline, "shop.orders"); r.code != 2 || !strings.Contains(r.stderr, "nothing to alter: give --drop-column COLUMN") {
		t.Errorf("no --drop-column: exit %d\n%s", r.code, r.stderr)
	}
}
