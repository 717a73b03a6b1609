package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The sales example evolves over several runs, through the binary, as a user evolves a
// pipeline: each change is a YAML edit (and a drop a command), each run converges the
// tables in metadata-only commits before its stages write, and after every run each
// table holds what the files say, the audit table every change once, every version
// reads in its own schema, and the history names each schema change with its run.
func TestSalesEvolvesThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	p := copyExample(t)
	dir := filepath.Dir(p)
	edit := func(pairs ...string) { editN(t, p, -1, pairs...) }
	editFirst := func(pairs ...string) { editN(t, p, 1, pairs...) }
	land := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "landing", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	show := func(table, columns, order string, extra ...string) string {
		t.Helper()
		return mustRun(t, bin, dir, append([]string{"table", "show", "--pipeline", p, table, "--columns", columns, "--order-by", order, "--format", "csv"}, extra...)...)
	}
	expect := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s:\n%s\nwant:\n%s", what, got, want)
		}
	}
	// Every change of the bronze table is in the audit table exactly once: the audit's
	// rows equal the bronze change feed from its first version, read at once.
	auditIsFeed := func(columns string) {
		t.Helper()
		feed := mustRun(t, bin, dir, "table", "changes", "--pipeline", p, "bronze.sales_transactions", "--from", "0", "--columns", columns+",_change_type,_commit_version", "--format", "csv")
		audit := show("audit.sales_transactions_history", columns+",_change_type,_commit_version", "_commit_version")
		var trimmed []string // table changes adds _commit_timestamp
		for _, line := range strings.Split(strings.TrimSpace(feed), "\n") {
			trimmed = append(trimmed, line[:strings.LastIndex(line, ",")])
		}
		feed = strings.Join(trimmed, "\n")
		if sortLines(feed) != sortLines(audit) {
			t.Fatalf("audit table:\n%s\nbronze change feed:\n%s", audit, feed)
		}
	}
	history := func(table string) string {
		t.Helper()
		return mustRun(t, bin, dir, "table", "history", "--pipeline", p, table)
	}

	// Run 1: the example as it is.
	mustRun(t, bin, dir, "run", p)
	auditIsFeed("transaction_id,amount")

	// Run 2: a sales channel, declared on the bronze table and its audit table, in the
	// new files only.
	edit("      - {name: load_timestamp, type: timestamp}\n      - {name: _change_type",
		"      - {name: load_timestamp, type: timestamp}\n      - {name: channel, type: string}\n      - {name: _change_type",
		"      - {name: sold_at, type: timestamp}\n      - {name: source_file, type: string}\n      - {name: load_timestamp, type: timestamp}\n    properties:\n      delta.enableChangeDataFeed: true\n      delta.logRetentionDuration",
		"      - {name: sold_at, type: timestamp}\n      - {name: source_file, type: string}\n      - {name: load_timestamp, type: timestamp}\n      - {name: channel, type: string}\n    properties:\n      delta.enableChangeDataFeed: true\n      delta.logRetentionDuration")
	land("sales/2026-01-16.csv", "transaction_id,customer_id,product,quantity,amount,sold_at,channel\nT-1009,C-1,grinder,1,99.00,2026-01-16T10:00:00Z,web\nT-1001,C-1,espresso beans,3,35.70,2026-01-14T09:12:00Z,shop\n")
	out := mustRun(t, bin, dir, "validate", "--check-tables", p)
	if !strings.Contains(out, "table bronze.sales_transactions will converge to its declaration in one metadata-only commit:\n  ADD COLUMNS channel (string)") {
		t.Fatalf("validate --check-tables does not print the plan:\n%s", out)
	}
	mustRun(t, bin, dir, "run", p)
	expect("bronze after the channel", show("bronze.sales_transactions", "transaction_id,quantity,amount,channel", "transaction_id"),
		"transaction_id,quantity,amount,channel\nT-1001,3,35.70,shop\nT-1002,1,129.00,\nT-1003,5,9.95,\nT-1004,1,59.90,\nT-1005,1,11.90,\nT-1006,2,31.00,\nT-1009,1,99.00,web\n")
	auditIsFeed("transaction_id,amount,channel")
	if h := history("bronze.sales_transactions"); !strings.Contains(h, "ADD COLUMNS") || !strings.Contains(h, "schema: add channel string") {
		t.Fatalf("bronze history has no ADD COLUMNS saying what it added:\n%s", h)
	}

	// Run 3: amount renamed total (column mapping turned on, on both tables).
	edit("      - {name: amount, type: \"decimal(10,2)\"}",
		"      - {name: total, type: \"decimal(10,2)\", renamed_from: amount}",
		"      delta.enableChangeDataFeed: true\n      delta.logRetentionDuration",
		"      delta.enableChangeDataFeed: true\n      delta.columnMapping.mode: name\n      delta.logRetentionDuration",
		"      - {name: _commit_timestamp, type: timestamp}\n",
		"      - {name: _commit_timestamp, type: timestamp}\n    properties:\n      delta.columnMapping.mode: name\n",
		`expect: "amount < 100"`, `expect: "total < 100"`) // the example's expectation follows the rename
	land("sales/2026-01-17.csv", "transaction_id,customer_id,product,quantity,total,sold_at,channel\nT-1007,C-3,beans,2,20.00,2026-01-17T10:00:00Z,web\n")
	mustRun(t, bin, dir, "run", p)
	expect("bronze after the rename", show("bronze.sales_transactions", "transaction_id,total", "transaction_id", "--where", "transaction_id IN ('T-1001', 'T-1007')"),
		"transaction_id,total\nT-1001,35.70\nT-1007,20.00\n")
	auditIsFeed("transaction_id,total,channel")

	// Run 4: quantity and total widened.
	edit("      - {name: quantity, type: int}", "      - {name: quantity, type: bigint}",
		"      - {name: total, type: \"decimal(10,2)\", renamed_from: amount}",
		"      - {name: total, type: \"decimal(14,2)\", renamed_from: amount}")
	land("sales/2026-01-18.csv", "transaction_id,customer_id,product,quantity,total,sold_at,channel\nT-1008,C-3,roaster,5000000000,123456789012.34,2026-01-18T10:00:00Z,b2b\n")
	mustRun(t, bin, dir, "run", p)
	expect("bronze after the widening", show("bronze.sales_transactions", "transaction_id,quantity,total", "transaction_id", "--where", "transaction_id IN ('T-1002', 'T-1008')"),
		"transaction_id,quantity,total\nT-1002,1,129.00\nT-1008,5000000000,123456789012.34\n")
	auditIsFeed("transaction_id,quantity,total,channel")

	// Run 5: a customer segment, tracked in the dimension: a key's first segment opens a
	// version (new_columns: version, the default); a key without one keeps its version.
	edit("      - {name: updated_at, type: timestamp}\n      - {name: source_file, type: string}",
		"      - {name: updated_at, type: timestamp}\n      - {name: segment, type: string}\n      - {name: source_file, type: string}",
		"      - {name: is_current, type: boolean}\n",
		"      - {name: is_current, type: boolean}\n      - {name: segment, type: string}\n",
		"    track: [name, email, city]", "    track: [name, email, city, segment]")
	land("customers/2026-01-16.csv", "customer_id,name,email,city,updated_at,segment\nC-1,Ada Lovelace,ada@example.com,Portland,2026-01-16T09:00:00Z,retail\nC-2,Grace Hopper,grace@example.com,Boston,2026-01-16T09:00:00Z,\n")
	mustRun(t, bin, dir, "run", p)
	dimCols := "customer_sk,customer_id,city,segment,valid_from,valid_to"
	expect("dimension after the segment", show("sales.customer", dimCols, "customer_sk"),
		"customer_sk,customer_id,city,segment,valid_from,valid_to\n"+
			"1,C-1,Seattle,,2026-01-14T08:00:00Z,2026-01-15T09:30:00Z\n"+
			"2,C-1,Portland,,2026-01-15T09:30:00Z,2026-01-16T09:00:00Z\n"+
			"3,C-2,Boston,,2026-01-14T08:00:00Z,9999-12-31T00:00:00Z\n"+
			"4,C-3,London,,2026-01-14T08:00:00Z,2026-01-15T09:30:00Z\n"+
			"5,C-3,London,,2026-01-15T09:30:00Z,9999-12-31T00:00:00Z\n"+
			"6,C-1,Portland,retail,2026-01-16T09:00:00Z,9999-12-31T00:00:00Z\n")

	// Run 6: a loyalty tier, tracked with new_columns: fill: the open versions take the
	// tier the source has, in place; no version opens for it.
	edit("      - {name: segment, type: string}\n      - {name: source_file, type: string}",
		"      - {name: segment, type: string}\n      - {name: tier, type: string}\n      - {name: source_file, type: string}",
		"      - {name: is_current, type: boolean}\n      - {name: segment, type: string}\n",
		"      - {name: is_current, type: boolean}\n      - {name: segment, type: string}\n      - {name: tier, type: string}\n",
		"    track: [name, email, city, segment]", "    track: [name, email, city, segment, tier]\n    new_columns: fill")
	land("customers/2026-01-17.csv", "customer_id,name,email,city,updated_at,segment,tier\nC-1,Ada Lovelace,ada@example.com,Portland,2026-01-17T09:00:00Z,retail,gold\nC-3,Alan Turing,alan@example.com,London,2026-01-17T09:00:00Z,,silver\n")
	mustRun(t, bin, dir, "run", p)
	expect("dimension after the tier", show("sales.customer", dimCols+",tier", "customer_sk"),
		"customer_sk,customer_id,city,segment,valid_from,valid_to,tier\n"+
			"1,C-1,Seattle,,2026-01-14T08:00:00Z,2026-01-15T09:30:00Z,\n"+
			"2,C-1,Portland,,2026-01-15T09:30:00Z,2026-01-16T09:00:00Z,\n"+
			"3,C-2,Boston,,2026-01-14T08:00:00Z,9999-12-31T00:00:00Z,\n"+
			"4,C-3,London,,2026-01-14T08:00:00Z,2026-01-15T09:30:00Z,\n"+
			"5,C-3,London,,2026-01-15T09:30:00Z,9999-12-31T00:00:00Z,silver\n"+
			"6,C-1,Portland,retail,2026-01-16T09:00:00Z,9999-12-31T00:00:00Z,gold\n")
	if h := history("sales.customer"); !strings.Contains(h, "UPDATE") || !strings.Contains(h, "schema: add tier string") {
		t.Fatalf("the dimension's history has no fill and no ADD COLUMNS of tier:\n%s", h)
	}

	// Run 7: product dropped from the bronze table: removed from its declaration, the
	// run refuses the table and names the command; table alter drops it (a dry run
	// first); the audit table keeps the column, NULL from the drop on.
	editFirst("      - {name: product, type: string}\n      - {name: quantity, type: bigint}\n      - {name: total, type: \"decimal(14,2)\", renamed_from: amount}\n      - {name: sold_at, type: timestamp}\n      - {name: source_file",
		"      - {name: quantity, type: bigint}\n      - {name: total, type: \"decimal(14,2)\", renamed_from: amount}\n      - {name: sold_at, type: timestamp}\n      - {name: source_file")
	land("sales/2026-01-19.csv", "transaction_id,customer_id,quantity,total,sold_at,channel\nT-1010,C-2,1,5.00,2026-01-19T10:00:00Z,web\n")
	r := runCmdEnv(t, dir, nil, bin, "run", p)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "--drop-column product") {
		t.Fatalf("a run with product no longer declared: exit %d\n%s%s\nwant it refused naming table alter", r.code, r.stdout, r.stderr)
	}
	before := history("bronze.sales_transactions")
	mustRun(t, bin, dir, "table", "alter", "--pipeline", p, "bronze.sales_transactions", "--drop-column", "product", "--dry-run")
	if history("bronze.sales_transactions") != before {
		t.Fatal("table alter --dry-run committed")
	}
	mustRun(t, bin, dir, "table", "alter", "--pipeline", p, "bronze.sales_transactions", "--drop-column", "product")
	mustRun(t, bin, dir, "run", p)
	// Sorted by key only: a key's two rows come in scan order, so they are sorted here.
	audit := strings.SplitAfter(show("audit.sales_transactions_history", "transaction_id,product,_change_type", "transaction_id", "--where", "transaction_id IN ('T-1001', 'T-1010') AND _change_type <> 'update_preimage'"), "\n")
	slices.Sort(audit[1:])
	expect("audit rows of the dropped column", strings.Join(audit, ""),
		"transaction_id,product,_change_type\nT-1001,espresso beans,insert\nT-1001,espresso beans,update_postimage\nT-1010,,insert\n")
	auditIsFeed("transaction_id,quantity,total,channel")
	if h := mustRun(t, bin, dir, "table", "schema", "--pipeline", p, "bronze.sales_transactions", "--history"); !strings.Contains(h, "product") || !strings.Contains(h, "DROP COLUMNS") {
		t.Fatalf("table schema --history does not show the drop:\n%s", h)
	}

	// Every version of every table reads, and every change feed from version 0 to the
	// latest, across the changes.
	for _, tbl := range []string{"bronze.sales_transactions", "audit.sales_transactions_history", "staging.customers", "sales.customer"} {
		out := mustRun(t, bin, dir, "table", "history", "--pipeline", p, tbl, "--format", "csv")
		versions := strings.Count(strings.TrimSpace(out), "\n")
		for v := range versions {
			mustRun(t, bin, dir, "table", "show", "--pipeline", p, tbl, "--version", strconv.Itoa(v), "--limit", "1")
		}
		if tbl != "audit.sales_transactions_history" {
			mustRun(t, bin, dir, "table", "changes", "--pipeline", p, tbl, "--from", "0")
		}
	}

	// Every version of the bronze table reads in its own schema: the first with amount
	// and no channel, the latest with total and channel.
	first := show("bronze.sales_transactions", "transaction_id,amount", "transaction_id", "--version", "1")
	expect("bronze at version 1", first, "transaction_id,amount\nT-1001,23.80\nT-1002,149.00\nT-1003,9.95\nT-1004,59.90\n")
	for _, op := range []string{"ADD COLUMNS", "CHANGE COLUMNS", "CHANGE COLUMN "} {
		if h := history("bronze.sales_transactions"); !strings.Contains(h, op) {
			t.Fatalf("bronze history has no %s:\n%s", op, h)
		}
	}
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 1 {
		body := lines[1:]
		slices.Sort(body)
		lines = append(lines[:1], body...)
	}
	return strings.Join(lines, "\n")
}

// editN replaces each pair's first string with its second in the file at p, n times
// (-1: every one); each first string must be there.
func editN(t *testing.T, p string, n int, pairs ...string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("the pipeline has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], n)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
