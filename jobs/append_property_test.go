package jobs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of an append ingest: random CSV files (some rows with a bad value, a
// blank line, quoted fields), delivered over random runs (each run a few new files; the
// files already loaded stay in the landing directory; now and then a rerun, which reads
// nothing), with on_error skip or quarantine, give after every run exactly the rows of
// a reference written in the test: every good row of every file once, with its file;
// every bad row counted as skipped, or once in the quarantine table with its file,
// line, column and value.
func TestAppendIngestProperty(t *testing.T) {
	for _, onError := range []string{"skip", "quarantine"} {
		t.Run(onError, func(t *testing.T) {
			t.Parallel()
			for seed := range propertySeeds(cdcStreams) {
				appendProperty(t, seed, onError)
			}
		})
	}
}

func appendProperty(t *testing.T, seed uint64, onError string) {
	rng := rand.New(rand.NewPCG(seed, 47))
	sales := salesTable(t)
	q := &Table{Name: "bronze.sales_quarantine", Path: "bronze/sales_quarantine",
		Schema: schemaOf(t, "source_file string", "line bigint", "column string", "value string", "error string", "record string", "load_timestamp timestamp")}
	clock := &testClock{t: t0}
	env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), sales, q)
	env.Delta.Now = clock.Now
	cfg := &IngestConfig{Source: "/landing/sales/*.csv", Target: sales.Name, OnError: onError}
	if onError == "quarantine" {
		cfg.QuarantineTable = q.Name
	}
	stage := NewIngest("ingest", cfg)
	var wantRows, wantBad []string
	var skipped int64
	file, id := 0, 0
	for run := range 3 + rng.IntN(5) {
		for range rng.IntN(4) {
			file++
			name := fmt.Sprintf("sales/%03d.csv", file)
			lines := []string{"id,qty,amount,sold_at"}
			for range rng.IntN(12) {
				id++
				sid, qty, amount := fmt.Sprintf("T%04d", id), fmt.Sprint(rng.IntN(100)), fmt.Sprintf("%d.%02d", rng.IntN(1000), rng.IntN(100))
				at := t0.Add(time.Duration(rng.IntN(10000)) * time.Minute).Format(time.RFC3339)
				if rng.IntN(8) == 0 {
					lines = append(lines, "") // (a blank line: no row)
				}
				rec := fmt.Sprintf("%s,%s,%s,%s", sid, qty, amount, at)
				switch rng.IntN(10) {
				case 0: // a bad qty
					rec = fmt.Sprintf("%s,x%s,%s,%s", sid, qty, amount, at)
					wantBad = append(wantBad, fmt.Sprintf("/landing/%s|%d|qty|x%s|%s", name, len(lines)+1, qty, rec))
					skipped++
				case 1: // a bad timestamp
					rec = fmt.Sprintf("%s,%s,%s,not-a-time", sid, qty, amount)
					wantBad = append(wantBad, fmt.Sprintf("/landing/%s|%d|sold_at|not-a-time|%s", name, len(lines)+1, rec))
					skipped++
				case 2: // a quoted id
					rec = fmt.Sprintf("%q,%s,%s,%s", sid, qty, amount, at)
					fallthrough
				default:
					shown := strings.TrimSuffix(strings.TrimRight(amount, "0"), ".") // (as a decimal reads: 126.8)
					wantRows = append(wantRows, fmt.Sprintf("%s|%s|%s|%s|/landing/%s", sid, qty, shown, t0Parse(t, at), name))
				}
				lines = append(lines, rec)
			}
			putFile(t, landing, name, strings.Join(lines, "\n")+"\n")
		}
		clock.Advance(time.Hour)
		res := runStage(t, stage, env)
		if rng.IntN(3) == 0 { // a rerun: nothing new to read
			clock.Advance(time.Minute)
			if again := runStage(t, stage, env); again.RowsRead != 0 || again.RowsWritten != 0 || len(again.VersionsWritten) != 0 {
				t.Fatalf("seed %d run %d: a rerun read %d rows and wrote %d in %v, want nothing", seed, run, again.RowsRead, again.RowsWritten, again.VersionsWritten)
			}
		}
		slices.Sort(wantRows)
		got := tableRows(t, env, sales, "id", "qty", "amount", "sold_at", "source_file")
		if !slices.Equal(got, wantRows) {
			t.Fatalf("seed %d run %d (on_error %s): the table differs from the reference\n%s", seed, run, onError, diff(got, wantRows))
		}
		if onError == "skip" {
			skipped -= res.RowsSkipped
		}
		if onError == "quarantine" && len(wantBad) > 0 {
			slices.Sort(wantBad)
			got := tableRows(t, env, q, "source_file", "line", "column", "value", "record")
			if !slices.Equal(got, wantBad) {
				t.Fatalf("seed %d run %d: the quarantine table differs from the reference\n%s", seed, run, diff(got, wantBad))
			}
		}
	}
	if onError == "skip" && skipped != 0 {
		t.Fatalf("seed %d: the runs counted %d skipped rows fewer than the bad rows", seed, skipped)
	}
}

// t0Parse renders an RFC 3339 time as tableRows renders a timestamp.
func t0Parse(t *testing.T, s string) string {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at.UTC().Format(time.RFC3339Nano)
}
