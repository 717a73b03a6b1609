package delta

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// scanRecords runs a scan and returns each record's rows (JSON lines, in order) with
// its position, and the stats and error it ended with.
func scanRecords(t *testing.T, sc *Scanner) (recs []string, stats ScanStats, err error) {
	t.Helper()
	defer sc.Release()
	for sc.Next() {
		rows := rowSet(t, []arrow.RecordBatch{sc.RecordBatch()})
		file, first, ok := sc.Position()
		where := "-"
		if ok {
			where = fmt.Sprintf("%s@%d", file.Path, first)
		}
		recs = append(recs, where+" "+strings.Join(rows, ";"))
	}
	return recs, sc.Stats(), sc.Err()
}

// A scan that reads files in parallel returns the records of a sequential one, in the
// same order, at the same positions, with the same stats: filtered or not, files only,
// one column or none (row counts).
func TestScanParallelFilesSameRecords(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	for _, tc := range []struct {
		where     string
		filesOnly bool
		columns   []string
	}{
		{"", false, nil}, {"id >= 250", false, nil}, {"country = 'FR' AND name IS NOT NULL", false, nil},
		{"id >= 250", true, nil}, {"", false, []string{"country"}}, {"id < 10", false, []string{"name", "id"}},
	} {
		t.Run(fmt.Sprint(tc.where, tc.filesOnly, tc.columns), func(t *testing.T) {
			opts := ScanOptions{BatchSize: 37, FilesOnly: tc.filesOnly, Columns: tc.columns}
			if tc.where != "" {
				p, err := expr.Parse(tc.where)
				if err != nil {
					t.Fatal(err)
				}
				opts.Filter = p
			}
			scan := func(par bool) ([]string, ScanStats, error) {
				o := opts
				o.ParallelFiles = par
				sc, err := Scan(context.Background(), st, "t", sch, []string{"country"}, adds, o)
				if err != nil {
					t.Fatal(err)
				}
				return scanRecords(t, sc)
			}
			want, wantStats, err := scan(false)
			if err != nil || len(want) == 0 {
				t.Fatalf("sequential scan: %d records, %v", len(want), err)
			}
			for range 5 { // goroutine timing varies from run to run
				got, gotStats, err := scan(true)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("parallel scan: %d records, sequential %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
				}
				if gotStats != wantStats {
					t.Errorf("stats in parallel %+v, sequentially %+v", gotStats, wantStats)
				}
			}
		})
	}
}

func firstDifference(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("record %d:\n got  %s\n want %s", i, g, w)
		}
	}
	return ""
}

// A file that cannot be read ends a parallel scan with the error a sequential scan
// gives, after the records of the files before it; releasing or cancelling a parallel
// scan stops its goroutines.
func TestScanParallelFilesErrorsAndStops(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	broken := append([]*Add(nil), adds...)
	missing := *broken[5]
	missing.Path = "country=FR/missing.parquet"
	broken[5] = &missing
	scan := func(par bool) ([]string, error) {
		sc, err := Scan(context.Background(), st, "t", sch, []string{"country"}, broken, ScanOptions{BatchSize: 37, ParallelFiles: par})
		if err != nil {
			t.Fatal(err)
		}
		recs, _, err := scanRecords(t, sc)
		return recs, err
	}
	want, wantErr := scan(false)
	got, gotErr := scan(true)
	if wantErr == nil || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("parallel: %d records, %v; sequential: %d records, %v", len(got), gotErr, len(want), wantErr)
	}

	checkScanStops(t, st, sch, adds, ScanOptions{BatchSize: 10, ParallelFiles: true})
}

// The records a scan returns stay intact after it has read other files: their arrays
// never share memory with the readers' pooled page buffers, which the next column
// chunks, of this scan or another, write over.
func TestScanRecordsOutliveTheirPages(t *testing.T) {
	defer pqfile.PoisonPageBuffers()()
	st, sch, adds, _ := pruneTable(t)
	scan := func(par bool) *Scanner {
		sc, err := Scan(context.Background(), st, "t", sch, []string{"country"}, adds, ScanOptions{BatchSize: 64, ParallelFiles: par})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	var want []string
	recs, _, err := scanRecords(t, scan(false)) // each record rendered as it comes
	if err != nil || len(recs) == 0 {
		t.Fatalf("scan: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		want = append(want, r[strings.IndexByte(r, ' ')+1:])
	}
	for _, par := range []bool{false, true} {
		sc := scan(par)
		kept, err := ReadAll(sc)
		sc.Release()
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the pooled page buffers are handed out again and overwritten
			if _, _, err := scanRecords(t, scan(true)); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, r := range kept {
			got = append(got, strings.Join(rowSet(t, []arrow.RecordBatch{r}), ";"))
			r.Release()
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("parallel %v: records kept across the later reads changed; first difference:\n%s", par, firstDifference(got, want))
		}
	}
}
