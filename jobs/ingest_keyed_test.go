package jobs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// eventsTable is a bronze table of change events that declares the op column too.
func eventsTable(t *testing.T) *Table {
	return &Table{
		Name:       "bronze.customers",
		Path:       "bronze/customers",
		Schema:     schemaOf(t, "id string", "city string", "op string", "updated_at timestamp", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
}

// Without sequence_by a key twice in a file is an error naming the file, the lines and
// the key, before anything is written (the earlier, good file is not loaded either).
func TestIngestUpsertDuplicateKeyFails(t *testing.T) {
	tbl := eventsTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	putFile(t, landing, "c/1.csv", "id,city,op,updated_at\nC1,Seattle,U,2026-01-14T01:00:00Z\n")
	putFile(t, landing, "c/2.csv", "id,city,op,updated_at\nC2,Leeds,U,2026-01-14T01:00:00Z\nC3,Rome,U,2026-01-14T01:00:00Z\n\nC2,York,U,2026-01-14T02:00:00Z\n")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "upsert", Keys: []string{"id"}})
	_, err := stage.Run(t.Context(), env)
	want := "/landing/c/2.csv: key C2 is on lines 2 and 5"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
	if v := tableVersion(t, env, tbl); v != -1 {
		t.Errorf("table at version %d, want none (the failed first run removes the table it created)", v)
	}
}

// With sequence_by, the rows of a key in one run fold to its last (a delete wins a tie,
// exact duplicates drop out): the table holds one row per key, whatever the order of
// the events in the files; a later run's older event changes nothing.
func TestIngestUpsertFoldsBySequence(t *testing.T) {
	tbl := eventsTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	cities := []string{"Seattle", "Portland", "Leeds", "Rome"}
	var lines []string
	want := map[string]string{}
	// 160 events for 48 keys: key k has events at hours 1..n, the last deciding.
	events := 0
	for k := 0; events < 160; k = (k + 1) % 48 {
		n := 1 + (events % 5)
		for h := 1; h <= n && events < 160; h++ {
			id := fmt.Sprintf("C%02d", k)
			op, city := "U", cities[(k+h)%len(cities)]
			at := fmt.Sprintf("2026-01-14T%02d:%02d:00Z", h, k)
			lines = append(lines, fmt.Sprintf("%s,%s,%s,%s", id, city, op, at))
			events++
			want[id] = fmt.Sprintf("%s|%s|%s", id, city, at)
		}
	}
	// The same hour's delete beats the upsert; an exact duplicate is dropped.
	lines = append(lines, "C01,Lost,D,2026-01-14T23:59:00Z", "C01,Back,U,2026-01-14T23:59:00Z", lines[0])
	delete(want, "C01")
	// Reverse the events: arrival order must not matter.
	slices.Reverse(lines)
	putFile(t, landing, "c/1.csv", "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "upsert", Keys: []string{"id"}, SequenceBy: "updated_at", DeleteWhen: "op = 'D'"})
	res := runStage(t, stage, env)
	got := tableRows(t, env, tbl, "id", "city", "updated_at")
	var wantRows []string
	for _, r := range want {
		wantRows = append(wantRows, strings.ReplaceAll(r, ".000000", ""))
	}
	slices.Sort(wantRows)
	if !slices.Equal(got, wantRows) {
		t.Fatalf("rows (%d, want %d):\n%s", len(got), len(wantRows), diff(got, wantRows))
	}
	if len(res.VersionsWritten) != 1 {
		t.Errorf("versions written %v, want one commit", res.VersionsWritten)
	}
	// A late event for C02 (older than its row) and a new row for C47.
	putFile(t, landing, "c/2.csv", "id,city,op,updated_at\nC02,Old,U,2026-01-14T00:30:00Z\nC47,Oslo,U,2026-01-15T00:00:00Z\n")
	runStage(t, stage, env)
	got = tableRows(t, env, tbl, "id", "city")
	if !slices.Contains(got, "C47|Oslo") || slices.Contains(got, "C02|Old") {
		t.Fatalf("after a late event: %v", got)
	}
}

// Two different rows of a key at one sequence are an error naming the key, the
// sequence as a timestamp and both places.
func TestIngestUpsertSameSequenceConflict(t *testing.T) {
	tbl := eventsTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	putFile(t, landing, "c/1.csv", "id,city,op,updated_at\nC1,Seattle,U,2026-01-14T01:00:00Z\n")
	putFile(t, landing, "c/2.csv", "id,city,op,updated_at\nC1,Tacoma,U,2026-01-14T01:00:00Z\n")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "upsert", Keys: []string{"id"}, SequenceBy: "updated_at"})
	_, err := stage.Run(t.Context(), env)
	want := "key C1 has two different rows at the same sequence value 2026-01-14T01:00:00Z (/landing/c/1.csv:2 and /landing/c/2.csv:2)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// delete_when names a column the table declares too: it means the source row.
func TestIngestUpsertDeleteWhenOnDeclaredColumn(t *testing.T) {
	tbl := eventsTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	putFile(t, landing, "c/1.csv", "id,city,op,updated_at\nC1,Seattle,U,2026-01-14T01:00:00Z\nC2,Leeds,U,2026-01-14T01:00:00Z\n")
	putFile(t, landing, "c/2.csv", "id,city,op,updated_at\nC1,Seattle,D,2026-01-14T02:00:00Z\nC3,Rome,D,2026-01-14T02:00:00Z\n")
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "upsert", Keys: []string{"id"}, DeleteWhen: "op = 'D'"})
	runStage(t, stage, env)
	if got, want := tableRows(t, env, tbl, "id", "city"), []string{"C2|Leeds"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
}

func snapshotTable(t *testing.T) *Table {
	return &Table{
		Name:       "bronze.products",
		Path:       "bronze/products",
		Schema:     schemaOf(t, "sku string", "name string", "price decimal(10,2)", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
}

// Snapshot mode: each run's files are the whole table. Keys they lack are deleted,
// changed rows updated (NULL = NULL), new ones inserted, equal rows untouched, in one
// commit; the change feed shows only the real changes; a run with no new file commits
// nothing. The same with deletion vectors on the table: the changed rows' file is kept
// with a deletion vector instead of rewritten.
func TestIngestSnapshotDiffs(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(fmt.Sprint("deletion_vectors=", dv), func(t *testing.T) {
			tbl := snapshotTable(t)
			if dv {
				tbl.Properties[delta.PropEnableDeletionVectors] = "true"
			}
			env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
			stage := NewIngest("ingest", &IngestConfig{Source: "/landing/p/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"sku"}})
			putFile(t, landing, "p/day1.csv", "sku,name,price\nA,Apple,1.00\nB,Bread,2.50\nC,Cheese,\n")
			runStage(t, stage, env)
			putFile(t, landing, "p/day2.csv", "sku,name,price\nA,Apple,1.00\nB,Bread,2.75\nC,Cheese,\nD,Dates,4.00\n")
			res := runStage(t, stage, env)
			if len(res.VersionsWritten) != 1 {
				t.Fatalf("day 2 versions %v, want one commit", res.VersionsWritten)
			}
			// Day 2 changed one row of day 1's file.
			dt, snap := latest(t, env, tbl)
			withDV := slices.ContainsFunc(snap.Files(), func(a *delta.Add) bool { return a.DeletionVector != nil })
			if withDV != dv {
				t.Errorf("after day 2, a data file has a deletion vector: %v, want %v", withDV, dv)
			}
			putFile(t, landing, "p/day3.csv", "sku,name,price\nB,Bread,2.75\nC,Cheese,3.10\nD,Dates,4.00\n")
			runStage(t, stage, env)
			if got, want := tableRows(t, env, tbl, "sku", "name", "price"), []string{"B|Bread|2.75", "C|Cheese|3.1", "D|Dates|4"}; !slices.Equal(got, want) {
				t.Fatalf("rows:\n%s", diff(got, want))
			}
			v := tableVersion(t, env, tbl)
			var feed []string
			for _, r := range append(changeRows(t, dt, v-1), changeRows(t, dt, v)...) {
				feed = append(feed, r)
			}
			got := strings.Join(feed, "\n")
			for _, want := range []string{"update_postimage", "insert", "delete"} {
				if !strings.Contains(got, want) {
					t.Errorf("change feed of days 2 and 3 lacks %s:\n%s", want, got)
				}
			}
			if strings.Contains(got, "Apple|1|/landing/p/day2.csv") || strings.Count(got, "update_postimage") != 2 {
				t.Errorf("change feed of days 2 and 3 shows more than the two updates, an insert and a delete:\n%s", got)
			}
			if res := runStage(t, stage, env); len(res.VersionsWritten) != 0 || tableVersion(t, env, tbl) != v {
				t.Fatalf("a run with no new file committed %v", res.VersionsWritten)
			}
		})
	}
}

// A crash at any store operation of a snapshot ingest and of an upsert with delete_when,
// then reruns, gives exactly the table of an uninterrupted run.
func TestIngestKeyedCrashAtEveryOperation(t *testing.T) {
	for _, mode := range []string{"snapshot", "upsert", "snapshot/budget", "upsert/budget"} {
		t.Run(mode, func(t *testing.T) {
			budget := ByteSize(0)
			if m, ok := strings.CutSuffix(mode, "/budget"); ok {
				mode, budget = m, tinyBudget // every run over spill files
			}
			setup := func() (*faultstore.Store, *Env, *Table) {
				tbl := eventsTable(t)
				fs := faultstore.New(mem.New(mem.Config{}))
				env, landing := ingestEnv(t, fs, tbl)
				env.MemoryBudget = budget
				putFile(t, landing, "c/1.csv", "id,city,op,updated_at\nC1,Seattle,U,2026-01-14T01:00:00Z\nC2,Leeds,U,2026-01-14T01:00:00Z\n")
				putFile(t, landing, "c/2.csv", "id,city,op,updated_at\nC1,Portland,U,2026-01-14T02:00:00Z\nC2,Leeds,D,2026-01-14T03:00:00Z\nC3,Rome,U,2026-01-14T02:00:00Z\n")
				return fs, env, tbl
			}
			cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: "bronze.customers", Mode: mode, Keys: []string{"id"}, SequenceBy: "updated_at", DeleteWhen: "op = 'D'"}
			spills := 0
			want := crashAtEveryOperation(t, spillProbe{NewIngest("ingest", cfg), &spills}, setup, rowsOf(t, "id", "city"))
			if exp := []string{"C1|Portland", "C3|Rome"}; !slices.Equal(want, exp) {
				t.Fatalf("uninterrupted run:\n%s", diff(want, exp))
			}
			if budget > 0 && spills == 0 {
				t.Fatalf("with a budget of %s, no run worked over spill files", budget)
			}
		})
	}
}

// A CSV that lacks a declared nullable column fails naming the file and the column,
// unless the stage allows missing columns: then they are NULL and the notes say so.
func TestIngestMissingColumns(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			tbl := eventsTable(t)
			env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
			putFile(t, landing, "c/1.csv", "id,updated_at\nC1,2026-01-14T01:00:00Z\n")
			stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, AllowMissingColumns: allow})
			res, err := stage.Run(t.Context(), env)
			if !allow {
				if err == nil || !strings.Contains(err.Error(), "/landing/c/1.csv") || !strings.Contains(err.Error(), "city (string), op (string)") {
					t.Fatalf("err = %v, want the file and the missing columns named", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(res.Notes, func(n string) bool {
				return strings.Contains(n, "/landing/c/1.csv lacks the columns city, op: filled with NULL")
			}) {
				t.Errorf("notes %q do not name the columns filled with NULL", res.Notes)
			}
			if got, want := tableRows(t, env, tbl, "id", "city", "op"), []string{"C1|NULL|NULL"}; !slices.Equal(got, want) {
				t.Fatalf("rows:\n%s", diff(got, want))
			}
		})
	}
}

// A table that holds a key twice (written by an append, not by snapshot mode) holds it
// once after a snapshot load: the later copy is deleted, the first updated or kept,
// whatever their places in the table's files.
func TestIngestSnapshotTableHoldsKeyTwice(t *testing.T) {
	tbl := snapshotTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	putFile(t, landing, "a/1.csv", "sku,name,price\nA,Apple,1.00\nB,Bread,2.50\nB,Bread,2.60\nC,Cheese,3.00\n")
	putFile(t, landing, "a/2.csv", "sku,name,price\nA,Apple,1.10\nD,Dates,4.00\n")
	runStage(t, NewIngest("append", &IngestConfig{Source: "/landing/a/*.csv", Target: tbl.Name}), env)
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/p/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"sku"}})
	putFile(t, landing, "p/day1.csv", "sku,name,price\nA,Apple,1.00\nB,Bread,2.75\nC,Cheese,3.20\nD,Dates,4.00\n")
	runStage(t, stage, env)
	if got, want := tableRows(t, env, tbl, "sku", "name", "price"), []string{"A|Apple|1", "B|Bread|2.75", "C|Cheese|3.2", "D|Dates|4"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
}

// A snapshot holds each key once: a key twice fails naming both places, into an empty
// table (appended) and into one with rows (merged), and nothing is written.
func TestIngestSnapshotDuplicateKey(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(fmt.Sprint("empty=", first), func(t *testing.T) {
			tbl := snapshotTable(t)
			env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
			stage := NewIngest("ingest", &IngestConfig{Source: "/landing/p/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"sku"}})
			if !first {
				putFile(t, landing, "p/0.csv", "sku,name,price\nA,Apple,1.00\n")
				runStage(t, stage, env)
			}
			before := int64(-1) // the failed first run removes the table it created
			if !first {
				before = tableVersion(t, env, tbl)
			}
			putFile(t, landing, "p/1.csv", "sku,name,price\nA,Apple,1.00\nB,Bread,2.50\n")
			putFile(t, landing, "p/2.csv", "sku,name,price\nC,Cheese,3.00\nB,Buns,2.60\n")
			_, err := stage.Run(t.Context(), env)
			want := "key B is in /landing/p/1.csv:3 and /landing/p/2.csv:3"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if v := tableVersion(t, env, tbl); v != before {
				t.Errorf("table at version %d after the failed run, want %d", v, before)
			}
		})
	}
}

// A snapshot run's kept rows (the changed ones) count their own bytes against the memory
// budget, not the whole lineage columns their batch shares with every other batch of
// the file: a run that fits its budget works in memory whatever the length of its
// files' paths (counted whole, 4,000 kept rows of a 40,000-row file under a long path
// weighed as much as the whole file's source_file column, and the run went to spill
// files, several times slower).
func TestIngestSnapshotBudgetCountsKeptRows(t *testing.T) {
	tbl := snapshotTable(t)
	env, landing := ingestEnv(t, mem.New(mem.Config{}), tbl)
	dir := "p/" + strings.Repeat("extract-", 30)
	const n = 40000
	extract := func(day int) string {
		var b strings.Builder
		b.WriteString("sku,name,price\n")
		for i := range n {
			price := i % 100
			if day == 2 && i%10 == 3 {
				price++
			}
			fmt.Fprintf(&b, "S%06d,item %d,%d.00\n", i, i, price)
		}
		return b.String()
	}
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/" + dir + "/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"sku"}})
	putFile(t, landing, dir+"/day1.csv", extract(1))
	runStage(t, stage, env)
	// The key index (90 bytes a key: 3.6 MB) and the kept rows (about 1 MB) fit in the
	// 8 MB a 16 MiB budget plans to hold; the file's source_file column alone is 9.6 MB.
	env.MemoryBudget = 16 << 20
	putFile(t, landing, dir+"/day2.csv", extract(2))
	res := runStage(t, stage, env)
	if spilled(res) {
		t.Fatalf("the run went to spill files: %q", res.Notes)
	}
	tb, err := env.openTable(t.Context(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := tb.History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m := hist[0].OperationMetrics
	if got := fmt.Sprint(m["numTargetRowsUpdated"], " ", m["numTargetRowsInserted"], " ", m["numTargetRowsDeleted"]); got != "4000 0 0" {
		t.Errorf("updated, inserted, deleted: %s, want 4000 0 0", got)
	}
}
