package executor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/sparkconnect"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Cancel stops a Spark stage by interrupting its operation on the server: with the
// cluster's one core held by another query, the stage's INSERT waits on the server;
// Cancel ends it there (the server no longer runs it), the task ends cancelled, and
// the history table is left as it was (a later run captures everything once).
func TestCancelInterruptsSparkStage(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	wh := t.TempDir()
	d := executor.NewDispatcher(0)
	defer d.Close()
	spec := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
	spec.Stages = slices.DeleteFunc(spec.Stages, func(s *pipelines.Stage) bool {
		return s.Name == "capture_sales_history" || s.Name == "vacuum"
	})
	if _, err := runPipeline(ctx, t, d, spec, wh, remote, "load"); err != nil {
		t.Fatal(err)
	}
	full := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
	task := stageTask(t, full, wh, "capture_sales_history")

	// Hold the one executor core.
	client, err := sparkconnect.Dial(remote)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	blocker := client.NewSession()
	bctx, stopBlocker := context.WithCancel(ctx)
	blockerOp := sparkconnect.NewOperationID()
	var wg sync.WaitGroup
	wg.Go(func() {
		blocker.Execute(bctx, blockerOp, "SELECT count(*) FROM range(0, 1000000000000) a WHERE a.id * 7 % 13 = 5")
	})
	defer func() { stopBlocker(); wg.Wait(); blocker.Release(ctx) }()
	waitFor(t, "the blocking query to run", func() bool { ok, _ := blocker.Running(ctx, blockerOp); return ok })

	ex, err := executor.NewSpark(executor.SparkConfig{Remote: remote, Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	var mu sync.Mutex
	var session, op string
	task.OnOperation = func(s, o string) { mu.Lock(); session, op = s, o; mu.Unlock() }
	if err := ex.Submit(ctx, task); err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		mu.Lock()
		s, o := session, op
		mu.Unlock()
		if o == "" {
			return false
		}
		ok, _ := client.Session(s).Running(ctx, o)
		return ok
	}
	waitFor(t, "the stage's INSERT to wait on the server", running)
	if err := ex.Cancel(ctx, task.Key); err != nil {
		t.Fatal(err)
	}
	st, err := ex.Status(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != executor.Cancelled || !errors.Is(st.Err, executor.ErrCancelled) {
		t.Errorf("status after cancel = %s (%v), want cancelled", st.State, st.Err)
	}
	if running() {
		t.Error("the stage's operation still runs on the server after Cancel")
	}
	if v := tableVersionOf(t, wh, "audit/sales_transactions_history"); v != 0 {
		t.Errorf("history table at version %d after the cancelled capture, want 0 (created, nothing captured)", v)
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1200 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
