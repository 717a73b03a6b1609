package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

const everyPipeline = `pipeline: every
schedule: "@every 2s"
%s
tables:
  raw.events:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
  raw.signals:
    columns: [{name: id, type: string}, {name: kind, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: %s/*.csv, target: raw.events}
  - {name: fetch, kind: ingest, source: %s/signals.csv, format: csv, target: raw.signals, depends_on: [load]}
`

// TestServeKilledMidStage: serve is SIGKILLed while a stage reads its source; a new
// serve marks the run interrupted within 30 s, the next slot succeeds, every source row
// is in the tables exactly once, and the run history survives. On local disk and MinIO.
func TestServeKilledMidStage(t *testing.T) {
	bin := buildBinary(t)
	for _, backend := range []string{"local", "minio"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			wh := localWarehouse(t, filepath.Join(dir, "warehouse"))
			if backend == "minio" {
				wh = minioWarehouse(t)
			}
			src := newGatedSource(t, "id,kind\ns1,signal\ns2,signal\n")
			writeFiles(t, dir, map[string]string{
				"pipes/every.yaml": fmt.Sprintf(everyPipeline, wh.yaml, filepath.Join(dir, "landing"), src.srv.URL),
				"landing/1.csv":    "id\ne1\ne2\n",
			})
			pipeline := filepath.Join(dir, "pipes", "every.yaml")
			store := scheduler.NewStore(wh.store)
			ctx := context.Background()

			a := startServe(t, bin, filepath.Join(dir, "pipes"), wh.env)
			waitFor(t, 30*time.Second, "two runs of the first serve", func() bool {
				n := 0
				for _, r := range runsOf(t, store, "every") {
					if r.Status == scheduler.Succeeded {
						n++
					}
				}
				return n >= 2
			})
			src.hold()
			select {
			case <-src.requests: // a run's fetch stage waits on the source
			case <-time.After(30 * time.Second):
				t.Fatal("no run reached the fetch stage within 30 s")
			}
			ids, err := store.ActiveIDs(ctx)
			if err != nil || len(ids) != 1 {
				t.Fatalf("active runs %v (%v), want the one reading", ids, err)
			}
			killed := ids[0]
			waitFor(t, 10*time.Second, "the record to show the fetch stage running", func() bool {
				r, _ := store.Get(ctx, killed)
				return r != nil && r.Stage("fetch") != nil && r.Stage("fetch").Status == scheduler.Running
			})
			a.kill(t)
			killedAt := time.Now()
			src.release()

			b := startServe(t, bin, filepath.Join(dir, "pipes"), wh.env)
			// The killed run is marked interrupted; as its slot is the latest one handled, the
			// catch-up policy (latest) runs it again at once, as attempt 2, which keeps why.
			var rec *scheduler.Record
			waitFor(t, 30*time.Second, "the killed run to be marked interrupted", func() bool {
				rec, _ = store.Get(ctx, killed)
				return rec != nil && (rec.Status == scheduler.Interrupted || rec.Attempt == 2)
			})
			if took := time.Since(killedAt); took > 30*time.Second {
				t.Errorf("marked interrupted %s after the kill, want within 30 s", took)
			}
			if want := fmt.Sprintf("its process is gone: host %s pid %d, last heartbeat", rec.Heartbeat.Host, a.pid); !strings.Contains(rec.Reason, want) {
				t.Errorf("interrupted run: reason %q; want it to say %q", rec.Reason, want)
			}
			var next *scheduler.Record
			waitFor(t, 30*time.Second, "a later slot to succeed", func() bool {
				for _, r := range runsOf(t, store, "every") {
					if r.Trigger.Slot.After(rec.Trigger.Slot) && r.Status == scheduler.Succeeded && r.Heartbeat.PID == b.pid {
						next = r
						return true
					}
				}
				return false
			})
			t.Logf("killed run %s: %s attempt %d (%s); next slot %s %s", killed, rec.Status, rec.Attempt, rec.Reason, next.ID, next.Status)
			writeFiles(t, dir, map[string]string{"landing/2.csv": "id\ne3\n"})
			waitFor(t, 30*time.Second, "the new file to be loaded", func() bool {
				return tableIDs(t, bin, pipeline, "raw.events", wh.env) == "e1\ne2\ne3\nid\n"
			})
			b.term(t)

			if got := tableIDs(t, bin, pipeline, "raw.events", wh.env); got != "e1\ne2\ne3\nid\n" {
				t.Errorf("raw.events ids:\n%s\nwant e1, e2, e3 once each", got)
			}
			if got := tableIDs(t, bin, pipeline, "raw.signals", wh.env); got != "id\ns1\ns2\n" {
				t.Errorf("raw.signals ids:\n%s\nwant s1, s2 once each", got)
			}
			runs := runsOf(t, store, "every")
			byPID := map[int]int{}
			seen := map[string]bool{}
			for _, r := range runs {
				if r.Status.Active() || seen[r.ID] {
					t.Errorf("run %s: %s (listed before: %v); want every record final, once", r.ID, r.Status, seen[r.ID])
				}
				seen[r.ID] = true
				if r.Heartbeat != nil {
					byPID[r.Heartbeat.PID]++
				}
			}
			if byPID[a.pid] == 0 || byPID[b.pid] < 2 {
				t.Errorf("runs by process %v: want the killed serve's (pid %d) history kept and the new one's (pid %d)", byPID, a.pid, b.pid)
			}
			if ids, _ := store.ActiveIDs(ctx); len(ids) != 0 {
				t.Errorf("active runs after SIGTERM: %v", ids)
			}
		})
	}
}

const pairPipeline = `pipeline: pair
schedule: "@every 2s"
catchup: all
overlap: queue
%s
tables:
  raw.events:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: %s/*.csv, target: raw.events}
`

// TestTwoServesOneWarehouse: two serves share a MinIO warehouse for 60 s; the one that
// holds the lease is killed halfway and the other takes over. Every slot of the period
// has exactly one record, and it succeeded.
func TestTwoServesOneWarehouse(t *testing.T) {
	bin := buildBinary(t)
	wh := minioWarehouse(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"pipes/pair.yaml": fmt.Sprintf(pairPipeline, wh.yaml, filepath.Join(dir, "landing")),
		"landing/1.csv":   "id\ne1\ne2\n",
	})
	store := scheduler.NewStore(wh.store)
	ctx := context.Background()
	start := time.Now()
	a := startServe(t, bin, filepath.Join(dir, "pipes"), wh.env)
	waitFor(t, 20*time.Second, "the first serve to hold the lease", func() bool { return a.health(t).Leases[0].Held })
	b := startServe(t, bin, filepath.Join(dir, "pipes"), wh.env)
	time.Sleep(3 * time.Second)
	if h := b.health(t); h.Leases[0].Held {
		t.Fatalf("the second serve holds the lease too: %+v", h.Leases)
	}
	time.Sleep(time.Until(start.Add(30 * time.Second)))
	a.kill(t)
	killedAt := time.Now()
	waitFor(t, scheduler.DefaultLeaseTTL+5*time.Second, "the second serve to take the lease over", func() bool { return b.health(t).Leases[0].Held })
	t.Logf("took over %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))
	time.Sleep(time.Until(start.Add(60 * time.Second)))
	stop := time.Now()
	b.term(t)

	anchor, ok := store.StoredAnchor(ctx, "pair")
	if !ok {
		t.Fatal("no anchor in the store")
	}
	bySlot := map[time.Time][]*scheduler.Record{}
	byPID := map[int]int{}
	for _, r := range runsOf(t, store, "pair") {
		bySlot[r.Trigger.Slot] = append(bySlot[r.Trigger.Slot], r)
		if r.Status == scheduler.Succeeded {
			byPID[r.Heartbeat.PID]++
		}
	}
	n := 0
	for s := anchor.Add(2 * time.Second); s.Before(stop.Add(-4 * time.Second)); s = s.Add(2 * time.Second) {
		n++
		recs := bySlot[s]
		if len(recs) != 1 || recs[0].Status != scheduler.Succeeded {
			var got []string
			for _, r := range recs {
				got = append(got, fmt.Sprintf("%s %s attempt %d: %s", r.ID, r.Status, r.Attempt, r.Reason))
			}
			t.Errorf("slot %s: %v; want one succeeded record", s.Format(time.RFC3339), got)
		}
	}
	if n < 25 || byPID[a.pid] == 0 || byPID[b.pid] == 0 {
		t.Errorf("%d slots checked; succeeded runs by pid %v: want about 30 slots, run by both serves (%d then %d)", n, byPID, a.pid, b.pid)
	}
	if got := tableIDs(t, bin, filepath.Join(dir, "pipes", "pair.yaml"), "raw.events", wh.env); got != "e1\ne2\nid\n" {
		t.Errorf("raw.events ids:\n%s\nwant the file's rows once", got)
	}
}

const onDemandPipeline = `pipeline: ondemand
warehouse: %s
tables:
  raw.signals:
    columns: [{name: id, type: string}, {name: kind, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: fetch, kind: ingest, source: %s/signals.csv, format: csv, target: raw.signals}
`

// TestServeTriggerCancelReload: runs trigger and runs cancel go to the serve that
// schedules the pipeline; an invalid file is skipped and an invalid change keeps the
// previous version; /healthz says so.
func TestServeTriggerCancelReload(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	src := newGatedSource(t, "id,kind\ns1,signal\n")
	src.hold()
	pipes := filepath.Join(dir, "pipes")
	file := filepath.Join(pipes, "ondemand.yaml")
	writeFiles(t, dir, map[string]string{
		"pipes/ondemand.yaml": fmt.Sprintf(onDemandPipeline, filepath.Join(dir, "warehouse"), src.srv.URL),
		"pipes/broken.yaml":   "pipeline: broken\nstages: []\n",
	})
	s := startServe(t, bin, pipes, nil)
	h := s.health(t)
	if strings.Join(h.Pipelines, ",") != "ondemand" || len(h.Invalid) != 1 || !strings.HasSuffix(h.Invalid[0], "broken.yaml") || h.Status != "ok" {
		t.Errorf("healthz %+v: want ondemand served and broken.yaml skipped", h)
	}
	if !strings.Contains(s.stderr.String(), `msg="invalid, skipped" file=`) || !strings.Contains(s.stderr.String(), `broken.yaml problems=`) {
		t.Errorf("serve stderr:\n%s\nwant broken.yaml reported", s.stderr)
	}
	waitFor(t, 10*time.Second, "the lease", func() bool { return s.health(t).Leases[0].Held })

	trig := runCmd(t, "", bin, "runs", "trigger", file)
	if trig.code != 0 || !strings.Contains(trig.stderr, fmt.Sprintf("queued for the serve on")) || !strings.Contains(trig.stderr, fmt.Sprintf("(pid %d)", s.pid)) {
		t.Fatalf("runs trigger: exit %d\n%s%s", trig.code, trig.stdout, trig.stderr)
	}
	id := strings.TrimSpace(trig.stdout)
	select {
	case <-src.requests:
	case <-time.After(20 * time.Second):
		t.Fatal("the triggered run did not reach its stage")
	}
	if c := runCmd(t, "", bin, "runs", "cancel", id, "--pipelines", pipes); c.code != 0 || !strings.Contains(c.stderr, "cancel requested") {
		t.Fatalf("runs cancel: exit %d\n%s", c.code, c.stderr)
	}
	store := scheduler.NewStore(localWarehouse(t, filepath.Join(dir, "warehouse")).store)
	var rec *scheduler.Record
	waitFor(t, 20*time.Second, "the run to be cancelled", func() bool {
		rec, _ = store.Get(context.Background(), id)
		return rec != nil && rec.Status == scheduler.Cancelled
	})
	if !strings.Contains(rec.Reason, "cancelled by ") || rec.Stage("fetch").Status != scheduler.Cancelled {
		t.Errorf("cancelled run: reason %q, fetch %s", rec.Reason, rec.Stage("fetch").Status)
	}

	src.release()
	done := runCmd(t, "", bin, "runs", "trigger", file, "--wait")
	if done.code != 0 || !strings.Contains(done.stdout, "fetch  succeeded") {
		t.Fatalf("runs trigger --wait: exit %d\n%s%s", done.code, done.stdout, done.stderr)
	}

	old, _ := os.ReadFile(file)
	time.Sleep(1100 * time.Millisecond) // a new modification time
	writeFiles(t, dir, map[string]string{"pipes/ondemand.yaml": string(old) + "bogus: 1\n"})
	waitFor(t, 10*time.Second, "the invalid change to be reported", func() bool {
		return strings.Contains(s.stderr.String(), `msg="invalid change: its previous version goes on"`) && strings.Contains(s.stderr.String(), "pipeline=ondemand")
	})
	if h := s.health(t); strings.Join(h.Pipelines, ",") != "ondemand" || len(h.Invalid) != 2 {
		t.Errorf("healthz after an invalid change %+v: want ondemand still served, both files invalid", h)
	}
	s.term(t)
	if !strings.Contains(s.stderr.String(), "every run's record is final") {
		t.Errorf("serve stderr:\n%s", s.stderr)
	}
}
