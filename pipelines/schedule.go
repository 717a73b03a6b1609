package pipelines

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/cron"
)

// This file holds what a pipeline says about its runs rather than its stages: the
// schedule's policies, parameters, run history retention and notifications.

// Catch-up policies: which slots missed while no scheduler ran are run.
const (
	CatchupNone   = "none"   // none: every missed slot is recorded as skipped
	CatchupLatest = "latest" // only the most recent missed slot runs (the default)
	CatchupAll    = "all"    // every missed slot runs, in order
)

// Overlap policies: what a slot does when the pipeline already has max_active_runs runs.
const (
	OverlapSkip  = "skip"  // the slot is recorded as skipped (the default)
	OverlapQueue = "queue" // it waits, in slot order
	OverlapAllow = "allow" // it starts at once (max_active_runs, if set, still caps)
)

// Defaults of the run policies.
const (
	DefaultCatchupWindow = 24 * time.Hour
	DefaultCatchup       = CatchupLatest
	DefaultOverlap       = OverlapSkip
)

// Parameter types.
var paramTypes = []string{"string", "int", "float", "bool", "date", "timestamp"}

// Param is a declared run parameter: ${params.NAME} in stage values, set per run with
// --param NAME=VALUE, else its default. A parameter without a default must be given.
type Param struct {
	Name        string
	Type        string // string, int, float, bool, date (2006-01-02) or timestamp (RFC 3339)
	Default     *string
	Description string
}

// History is the run history retention: the newest KeepRuns records and those younger
// than KeepDays days are kept (0: no limit); an active run is never removed.
type History struct {
	KeepRuns int
	KeepDays int
}

// Webhook is a notification URL. URL may hold secrets (from ${VAR}); Display is the URL
// as written in the file, with its ${VAR} references unexpanded, for records and logs.
type Webhook struct {
	URL     string
	Display string
}

// Notify lists the webhooks told of a run's end.
type Notify struct {
	OnFailure []Webhook
	OnSuccess []Webhook
}

type paramSpec struct {
	Name        string  `yaml:"name"`
	Type        string  `yaml:"type"`
	Default     *string `yaml:"default"`
	Description string  `yaml:"description"`
}

type historySpec struct {
	KeepRuns int `yaml:"keep_runs"`
	KeepDays int `yaml:"keep_days"`
}

type notifySpec struct {
	OnFailure []string `yaml:"on_failure"`
	OnSuccess []string `yaml:"on_success"`
}

// checkRunPolicies validates the schedule and the keys about runs.
func checkRunPolicies(ps *problems, root *yaml.Node, spec *Spec, fs *fileSpec, raw map[*yaml.Node]string) {
	key := func(path string) *yaml.Node { return lookup(root, path) }
	checkSchedule(ps, key, spec, fs)
	if fs.History.KeepRuns < 0 {
		ps.at(key("history.keep_runs"), "history: keep_runs must be 0 (no limit) or more, got %d", fs.History.KeepRuns)
	}
	if fs.History.KeepDays < 0 {
		ps.at(key("history.keep_days"), "history: keep_days must be 0 (no limit) or more, got %d", fs.History.KeepDays)
	}
	spec.History = History{KeepRuns: fs.History.KeepRuns, KeepDays: fs.History.KeepDays}
	spec.Notify = Notify{
		OnFailure: checkWebhooks(ps, key, raw, "on_failure", fs.Notify.OnFailure),
		OnSuccess: checkWebhooks(ps, key, raw, "on_success", fs.Notify.OnSuccess),
	}
	spec.Params = checkParams(ps, key, fs.Params)
}

// checkSchedule validates the schedule and the policies of scheduled runs (catchup,
// catchup_window, overlap, max_active_runs) into spec, with their defaults; key finds a
// key's node for the problems.
func checkSchedule(ps *problems, key func(path string) *yaml.Node, spec *Spec, fs *fileSpec) {
	if spec.Schedule != "" {
		s, err := cron.Parse(spec.Schedule, spec.Location)
		if err != nil {
			ps.at(key("schedule"), "invalid cron schedule %q: %v", spec.Schedule, err)
		} else {
			spec.Cron = s
		}
	}
	spec.Catchup = or(fs.Catchup, DefaultCatchup)
	if !slices.Contains([]string{CatchupNone, CatchupLatest, CatchupAll}, spec.Catchup) {
		ps.at(key("catchup"), "catchup: unknown value %q; expected none, latest or all", fs.Catchup)
	}
	spec.CatchupWindow = DefaultCatchupWindow
	if fs.CatchupWindow != nil {
		spec.CatchupWindow = time.Duration(*fs.CatchupWindow)
		if spec.CatchupWindow <= 0 {
			ps.at(key("catchup_window"), "catchup_window: must be longer than 0, got %s", spec.CatchupWindow)
		}
	}
	spec.Overlap = or(fs.Overlap, DefaultOverlap)
	if !slices.Contains([]string{OverlapSkip, OverlapQueue, OverlapAllow}, spec.Overlap) {
		ps.at(key("overlap"), "overlap: unknown value %q; expected skip, queue or allow", fs.Overlap)
	}
	switch {
	case fs.MaxActiveRuns != nil && *fs.MaxActiveRuns < 1:
		ps.at(key("max_active_runs"), "max_active_runs: must be 1 or more, got %d", *fs.MaxActiveRuns)
	case fs.MaxActiveRuns != nil:
		spec.MaxActiveRuns = *fs.MaxActiveRuns
	case spec.Overlap != OverlapAllow:
		spec.MaxActiveRuns = 1
	}
	if (spec.Catchup != DefaultCatchup || fs.CatchupWindow != nil) && spec.Schedule == "" {
		ps.at(key("catchup"), "catchup and catchup_window apply to scheduled runs: this pipeline has no schedule")
	}
}

// checkWebhooks validates the URLs of notify.field: each must be http(s). raw holds the
// text a URL had before ${...} references were expanded, which messages show.
func checkWebhooks(ps *problems, key func(path string) *yaml.Node, raw map[*yaml.Node]string, field string, urls []string) []Webhook {
	var out []Webhook
	for i, u := range urls {
		path := fmt.Sprintf("notify.%s[%d]", field, i)
		n := key(path)
		display := u
		if r, ok := raw[n]; ok {
			display = r
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			ps.at(n, "%s: %q is not an http(s) URL", path, display)
			continue
		}
		out = append(out, Webhook{URL: u, Display: display})
	}
	return out
}

// checkParams validates the run parameters: a name that is an identifier and unique, a
// known type (string by default) and a default of that type.
func checkParams(ps *problems, key func(path string) *yaml.Node, params []paramSpec) []Param {
	var out []Param
	seen := map[string]bool{}
	for i, p := range params {
		at := func(field string) *yaml.Node { return key(fmt.Sprintf("params[%d].%s", i, field)) }
		switch {
		case p.Name == "":
			ps.at(key(fmt.Sprintf("params[%d]", i)), "params[%d]: missing name", i)
			continue
		case !columnRE.MatchString(p.Name):
			ps.at(at("name"), "params[%d]: invalid name %q: expected letters, digits and '_'", i, p.Name)
		case seen[p.Name]:
			ps.at(at("name"), "params[%d]: duplicate parameter %q", i, p.Name)
		}
		seen[p.Name] = true
		typ := or(p.Type, "string")
		if !slices.Contains(paramTypes, typ) {
			ps.at(at("type"), "param %s: unknown type %q; expected one of %s", p.Name, p.Type, strings.Join(paramTypes, ", "))
		} else if p.Default != nil {
			if err := checkParamValue(typ, *p.Default); err != nil {
				ps.at(at("default"), "param %s: default: %v", p.Name, err)
			}
		}
		out = append(out, Param{Name: p.Name, Type: typ, Default: p.Default, Description: p.Description})
	}
	return out
}

// checkParamValue checks a parameter value against its type.
func checkParamValue(typ, v string) error {
	var err error
	switch typ {
	case "int":
		if _, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("expected a whole number, got %q", v)
		}
	case "float":
		if _, err = strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("expected a number, got %q", v)
		}
	case "bool":
		if v != "true" && v != "false" {
			return fmt.Errorf("expected true or false, got %q", v)
		}
	case "date":
		if _, err = time.Parse(time.DateOnly, v); err != nil {
			return fmt.Errorf("expected a date such as 2026-01-31, got %q", v)
		}
	case "timestamp":
		if _, err = time.Parse(time.RFC3339, v); err != nil {
			return fmt.Errorf("expected an RFC 3339 timestamp such as 2026-01-31T02:00:00Z, got %q", v)
		}
	}
	return nil
}
