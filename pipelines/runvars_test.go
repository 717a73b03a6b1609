package pipelines

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
)

const paramsPipeline = `pipeline: daily
schedule: "30 2 * * *"
timezone: America/Chicago
overlap: queue
catchup: all
catchup_window: 7d
history: {keep_runs: 100, keep_days: 30}
notify:
  on_failure: ["https://hooks.example.com/services/${HOOK_TOKEN}"]
  on_success: [http://127.0.0.1:9/ok]
params:
  - {name: region, default: eu}
  - {name: limit, type: int}
tables:
  raw.t:
    columns:
      - {name: id, type: string}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
stages:
  - name: load
    kind: ingest
    source: landing/${params.region}/${run.slot_date}/*.csv
    target: raw.t
    description: up to ${params.limit} rows for ${run.slot}
`

func TestRunPolicies(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "HOOK_TOKEN" {
			return "s3cr3t", true
		}
		return "", false
	}
	spec, err := Parse("/p/daily.yaml", []byte(paramsPipeline), Options{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Cron == nil || spec.Cron.String() != "30 2 * * *" || spec.Cron.Location().String() != "America/Chicago" {
		t.Errorf("cron %v", spec.Cron)
	}
	if spec.Overlap != OverlapQueue || spec.Catchup != CatchupAll || spec.CatchupWindow != 7*24*time.Hour || spec.MaxActiveRuns != 1 {
		t.Errorf("policies overlap %s catchup %s window %s max %d; want queue all 168h 1", spec.Overlap, spec.Catchup, spec.CatchupWindow, spec.MaxActiveRuns)
	}
	if spec.History != (History{KeepRuns: 100, KeepDays: 30}) {
		t.Errorf("history %+v", spec.History)
	}
	want := Webhook{URL: "https://hooks.example.com/services/s3cr3t", Display: "https://hooks.example.com/services/${HOOK_TOKEN}"}
	if len(spec.Notify.OnFailure) != 1 || spec.Notify.OnFailure[0] != want {
		t.Errorf("on_failure %+v, want %+v", spec.Notify.OnFailure, want)
	}
	if got := spec.Notify.OnSuccess; len(got) != 1 || got[0].Display != "http://127.0.0.1:9/ok" {
		t.Errorf("on_success %+v", got)
	}
	src := spec.Stages[0].Config.(*jobs.IngestConfig).Source
	if src != "/p/landing/${params.region}/${run.slot_date}/*.csv" {
		t.Errorf("loaded source %q: references stay until a run binds them", src)
	}
	if !strings.Contains(string(spec.Source), "${HOOK_TOKEN}") || len(spec.Hash) != 64 {
		t.Errorf("the definition keeps the file as written, hashed: hash %q", spec.Hash)
	}

	if _, err := spec.ResolveParams(map[string]string{"limit": "ten", "zone": "x"}); err == nil ||
		err.Error() != "param limit (int): expected a whole number, got \"ten\"; param zone is not declared in pipeline daily (declared: region, limit)" {
		t.Errorf("ResolveParams: %v", err)
	}
	if _, err := spec.ResolveParams(nil); err == nil || !strings.Contains(err.Error(), "param limit (int) has no default: give it with --param limit=VALUE") {
		t.Errorf("ResolveParams without the required one: %v", err)
	}
	params, err := spec.ResolveParams(map[string]string{"limit": "10"})
	if err != nil {
		t.Fatal(err)
	}
	// 04:30Z on 11 March is 23:30 on the 10th in Chicago: the slot date is the local one.
	bound, err := spec.Bind(RunValues{Params: params, Slot: time.Date(2024, 3, 11, 4, 30, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if got := bound.Stages[0].Config.(*jobs.IngestConfig).Source; got != "/p/landing/eu/2024-03-10/*.csv" {
		t.Errorf("bound source %q, want the slot's date in Chicago", got)
	}
	if got := bound.Stages[0].Description; got != "up to 10 rows for 2024-03-11T04:30:00Z" {
		t.Errorf("bound description %q", got)
	}
}

func TestRunPolicyDefaults(t *testing.T) {
	spec, err := Parse("p.yaml", []byte("pipeline: p\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n"), Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Cron != nil || spec.Catchup != CatchupLatest || spec.CatchupWindow != 24*time.Hour || spec.Overlap != OverlapSkip || spec.MaxActiveRuns != 1 || spec.HasRunRefs() {
		t.Errorf("defaults: cron %v catchup %s window %s overlap %s max %d refs %v", spec.Cron, spec.Catchup, spec.CatchupWindow, spec.Overlap, spec.MaxActiveRuns, spec.HasRunRefs())
	}
	bound, err := spec.Bind(RunValues{Slot: time.Now()})
	if err != nil || bound != spec {
		t.Errorf("Bind of a pipeline without references: %v, %v; want the same spec", bound, err)
	}
	allow, err := Parse("p.yaml", []byte("pipeline: p\noverlap: allow\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n"), Options{LookupEnv: noEnv})
	if err != nil || allow.MaxActiveRuns != 0 {
		t.Errorf("overlap allow: max_active_runs %d (%v), want 0 (no limit)", allow.MaxActiveRuns, err)
	}
}
