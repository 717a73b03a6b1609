package sparkconnect_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/sparkconnect"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSpark()
	os.Exit(code)
}

func TestParseRemote(t *testing.T) {
	tests := []struct {
		in   string
		want sparkconnect.Remote
		err  bool
	}{
		{in: "sc://localhost", want: sparkconnect.Remote{Host: "localhost", Port: "15002"}},
		{in: "sc://10.0.0.5:443/;token=abc;user_id=etl", want: sparkconnect.Remote{Host: "10.0.0.5", Port: "443", Token: "abc", User: "etl", TLS: true}},
		{in: "sc://h:1/;use_ssl=true", want: sparkconnect.Remote{Host: "h", Port: "1", TLS: true}},
		{in: "http://h:1", err: true},
		{in: "sc://h:1/;color=blue", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := sparkconnect.ParseRemote(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("ParseRemote(%q) error = %v, want error %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("ParseRemote(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"sc://h:1":                         "sc://h:1",
		"sc://h:1/;token=secret":           "sc://h:1",
		"sc://h:1/;token=secret;user_id=u": "sc://h:1/;user_id=u",
	} {
		if got := sparkconnect.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func dial(t *testing.T) *sparkconnect.Client {
	t.Helper()
	c, err := sparkconnect.Dial(testenv.SparkRemote(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A session runs SQL on the server and returns its rows, Delta DDL and DML included;
// its confs hold for its later statements only.
func TestExecuteSQLAndConfs(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	s := c.NewSession()
	defer s.Release(ctx)

	res, err := s.Execute(ctx, "", "SELECT 1 AS one, 'a' AS s, CAST(NULL AS INT) AS n, TIMESTAMP '2026-01-14 08:00:00' AS ts")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(1), "a", nil, time.Date(2026, 1, 14, 8, 0, 0, 0, time.UTC)}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 4 {
		t.Fatalf("rows = %v, want one row of 4 values", res.Rows)
	}
	for i, w := range want {
		if res.Rows[0][i] != w {
			t.Errorf("column %s = %#v, want %#v", res.Columns[i], res.Rows[0][i], w)
		}
	}

	dir := filepath.Join(t.TempDir(), "t")
	if _, err := s.Execute(ctx, "", "CREATE TABLE delta.`"+dir+"` (id INT, v STRING) USING DELTA"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConf(ctx, map[string]string{
		"spark.databricks.delta.write.txnAppId":   "test:app",
		"spark.databricks.delta.write.txnVersion": "7",
	}); err != nil {
		t.Fatal(err)
	}
	merge := "MERGE INTO delta.`" + dir + "` t USING (SELECT * FROM VALUES (1, 'x'), (2, 'y') AS s0(id, v)) s ON t.id = s.id " +
		"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
	res, err = s.Execute(ctx, "", merge)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Value(0, "num_inserted_rows"); got != int64(2) {
		t.Errorf("MERGE metrics num_inserted_rows = %v, want 2 (result %v %v)", got, res.Columns, res.Rows)
	}
	// The same txn again is skipped by Delta: no new version.
	if _, err := s.Execute(ctx, "", merge); err != nil {
		t.Fatal(err)
	}
	res, err = s.Execute(ctx, "", "DESCRIBE HISTORY delta.`"+dir+"`")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Errorf("history has %d versions, want 2 (create, one merge): the txn did not make the repeat a no-op", len(res.Rows))
	}
	// Another session does not see the first one's confs.
	other := c.NewSession()
	defer other.Release(ctx)
	res, err = other.Execute(ctx, "", "SET spark.databricks.delta.write.txnAppId")
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Value(0, "value"); v != "<undefined>" && v != nil && v != "" {
		t.Errorf("a new session has txnAppId %v, want it unset", v)
	}

	_, err = s.Execute(ctx, "", "SELECT * FROM no_such_table_anywhere")
	var se *sparkconnect.Error
	if !errors.As(err, &se) || se.Class != "TABLE_OR_VIEW_NOT_FOUND" {
		t.Errorf("error = %v, want a *sparkconnect.Error of class TABLE_OR_VIEW_NOT_FOUND", err)
	}
}

// Cancelling a statement's context interrupts the operation on the server: the
// server's one core is free again at once for the next statement.
func TestCancelInterruptsOnServer(t *testing.T) {
	c := dial(t)
	s := c.NewSession()
	defer s.Release(context.Background())
	// A query that would run for hours on one core.
	long := "SELECT count(*) FROM range(0, 1000000000000) a WHERE a.id * 7 % 13 = 5"

	ctx, cancel := context.WithCancel(context.Background())
	op := sparkconnect.NewOperationID()
	done := make(chan error, 1)
	go func() { _, err := s.Execute(ctx, op, long); done <- err }()
	waitRunning(t, s, op)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute after cancel = %v, want context.Canceled", err)
	}
	// The operation ends on the server (an interrupt takes effect at the job's next
	// task boundary).
	waitEnded(t, s, op)

	// Interrupting from another client (as a restarted process would, knowing only the
	// session and operation ids) stops a running statement too.
	op2 := sparkconnect.NewOperationID()
	go func() { _, err := s.Execute(context.Background(), op2, long); done <- err }()
	waitRunning(t, s, op2)
	other := dial(t).Session(s.ID())
	ids, err := other.Interrupt(context.Background(), op2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != op2 {
		t.Errorf("Interrupt(%s) interrupted %v, want exactly it", op2, ids)
	}
	if err := <-done; !errors.Is(err, sparkconnect.ErrInterrupted) {
		t.Errorf("the interrupted statement returned %v, want ErrInterrupted", err)
	}
	// The core is free: a small query answers.
	res, err := s.Execute(context.Background(), "", "SELECT 2 AS two")
	if err != nil || res.Value(0, "two") != int64(2) {
		t.Errorf("after the interrupts: %v, %v; want 2", res, err)
	}
}

// waitEnded waits until the operation is gone from the server.
func waitEnded(t *testing.T, s *sparkconnect.Session, op string) {
	t.Helper()
	for range 600 {
		running, err := s.Running(context.Background(), op)
		if err != nil {
			t.Fatal(err)
		}
		if !running {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("operation %s still runs on the server 30 s after it was interrupted", op)
}

// waitRunning waits until the operation runs on the server.
func waitRunning(t *testing.T, s *sparkconnect.Session, op string) {
	t.Helper()
	for range 600 {
		running, err := s.Running(context.Background(), op)
		if err != nil {
			t.Fatal(err)
		}
		if running {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("operation %s never ran on the server", op)
}
