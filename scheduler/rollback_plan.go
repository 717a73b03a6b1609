package scheduler

import (
	"context"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// What a rollback does, table by table (docs/operations.md says it for people):
//
//   - A table the run committed to is restored (Delta RESTORE) to its version before the
//     run's first commit to it. Its RESTORE commit carries change data with the net
//     difference only (the rows the run added are deleted, those it removed inserted,
//     those it changed changed back), so a reader of its change feed sees exactly the
//     reversal of the run. An ingest target keeps its txns: the files the run loaded stay
//     loaded, and are not loaded again. Any other table's txns (its writers' progress)
//     go back to their versions before the run.
//   - An append-only history (the target of a capture_history) is never restored: the
//     changes the run made are true history. Its capture reads the RESTORE's change feed
//     at its next run and records the reversal, with the RESTORE's version (whose commit
//     names the rollback run) as _commit_version: the history then holds the run's
//     changes once and their reversal once.
//   - A merge from a change feed (scd1_merge, scd2_merge with source_changes) of a
//     restored table, in any pipeline of the warehouse, must not see the reversal: a
//     dimension that took the run's events and then their reversal is not the dimension of
//     the events without the run. So it goes back with its source: when it read the
//     run's versions, its target and event log are restored to their versions before its
//     first read of them; then (or when it had not read them yet) its progress (txn) is
//     set to the source's RESTORE version, in the same commit, so its next run reads what
//     comes after. Its target is a restored table in turn, whose consumers follow the
//     same rules. A merge that read versions from before the run in the same commit as
//     the run's, or has versions from before the run still to read, cannot be rolled
//     back exactly: the plan names it as a problem, and --force leaves it to read the
//     run's versions and their reversal.
//     A fact_load reading its source's change feed (source_changes) is such a merge.
//   - A fact_load reading a restored dimension's change feed (to re-key its facts) is
//     left as it is: it reads the run's changes and their reversal at its next run, and
//     re-keys the facts whose time falls in them by the restored versions.
//   - A fact_load of a restored snapshot source is left as it is too: its facts follow
//     the source's snapshot, so its next run reads the run's changes and their reversal
//     (or the whole snapshot) and its facts end as the restored source's.

// Rollback actions of a table.
const (
	RollbackRestore  = "restore"  // restored to RestoreTo
	RollbackKeep     = "keep"     // an append-only history: kept as it is
	RollbackProgress = "progress" // only its readers' progress is set (a txn-only commit)
)

// Rollback actions of a change feed reader.
const (
	ReaderRecordsReversal = "records the reversal" // a capture: reads the RESTORE's net changes
	ReaderRolledBack      = "rolled back"          // a merge restored with its source
	ReaderSkips           = "skips the run"        // a merge that had not read the run's versions
	ReaderNotExact        = "not exact"            // a merge the rollback cannot keep exact
	ReaderRekeys          = "re-keys"              // a fact_load's dimension: re-keys from the RESTORE's net changes
	ReaderFollows         = "follows"              // a fact_load of a snapshot source: its facts follow the restored snapshot
)

// RollbackTable is one table a rollback touches.
type RollbackTable struct {
	Table    string `json:"table"`
	Pipeline string `json:"pipeline"` // a pipeline that declares the table by that name
	Action   string `json:"action"`
	Why      string `json:"why"`
	// Stage is the last stage of the run that wrote the table, if it did.
	Stage string `json:"stage,omitempty"`
	// First and Last are the first and last versions the rollback undoes (the run's
	// commits, or a reader's); RestoreTo is the version restored, Latest the table's
	// version now.
	First     int64 `json:"first"`
	Last      int64 `json:"last"`
	RestoreTo int64 `json:"restore_to"`
	Latest    int64 `json:"latest"`
	// Later lists commits after the ones undone that the restore would undo too.
	Later []string `json:"later,omitempty"`
	// Keys identify a row in the RESTORE's change data (update pre/post images).
	Keys []string `json:"keys,omitempty"`
	// ResetProgress: the txns of the table's writers go back to RestoreTo's.
	ResetProgress bool `json:"reset_progress,omitempty"`
	// Internal: a table the orchestrator keeps for a stage (a merge's event log), no
	// declared table.
	Internal bool `json:"internal,omitempty"`
	// Progress lists the readers' progress (txn appId) set, in the same commit, to the
	// version of the RESTORE of the table they read.
	Progress []ProgressSet `json:"progress,omitempty"`

	path string
}

// ProgressSet is a change feed reader's progress that a rollback moves past the run's
// versions of Source and their restore.
type ProgressSet struct {
	AppID  string `json:"app_id"`
	Reader string `json:"reader"` // stage S of pipeline P
	Source string `json:"source"` // the table it reads, restored in the same rollback

	sourcePath string
}

// RollbackReader is a change feed reader of a table the rollback restores, and what
// becomes of it.
type RollbackReader struct {
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Kind     string `json:"kind"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	// ReadThrough is the last source version it read (nil: none yet).
	ReadThrough *int64 `json:"read_through,omitempty"`
	Action      string `json:"action"`
	Detail      string `json:"detail"`
	// Problem says why the rollback cannot keep it exact (--force goes on regardless).
	Problem string `json:"problem,omitempty"`
}

// RollbackPlan is what a rollback of a run would do, in order.
type RollbackPlan struct {
	Run     *Record          `json:"-"`
	Tables  []RollbackTable  `json:"tables"`
	Readers []RollbackReader `json:"readers,omitempty"`
}

// Blocked reports whether the rollback needs --force: a later commit touched one of
// the tables (the restore would undo it too), or a reader cannot be kept exact.
func (p *RollbackPlan) Blocked() bool { return len(p.Problems()) > 0 }

// Problems lists what keeps the rollback from being exact.
func (p *RollbackPlan) Problems() []string {
	var out []string
	for _, t := range p.Tables {
		for _, l := range t.Later {
			out = append(out, fmt.Sprintf("%s: a later commit, %s, would be undone too", t.Table, l))
		}
	}
	for _, rd := range p.Readers {
		if rd.Problem != "" {
			out = append(out, fmt.Sprintf("stage %s of pipeline %s: %s", rd.Stage, rd.Pipeline, rd.Problem))
		}
	}
	return out
}

// planner works out a rollback plan.
type planner struct {
	r      *Runner
	store  *Store
	spec   *pipelines.Spec // the run's definition
	opts   delta.Options
	specs  []*pipelines.Spec // the pipelines of the warehouse, the run's first
	plan   *RollbackPlan
	byPath map[string]int // plan.Tables index by path
}

// readerRef is a change feed reader of the warehouse.
type readerRef struct {
	c        jobs.Consumer
	kind     jobs.Kind
	eventLog string // its event log's path ("" for a capture)
}

// PlanRollback works out a rollback of rec, whose definition is spec (SpecOf); loaded
// are the pipelines whose change feed readers it must keep consistent (those of other
// warehouses are left out).
func (r *Runner) PlanRollback(ctx context.Context, spec *pipelines.Spec, rec *Record, loaded []*pipelines.Spec) (*RollbackPlan, error) {
	switch {
	case rec.Status.Active():
		return nil, fmt.Errorf("run %s is %s: cancel it or wait for it to end before rolling it back", rec.ID, rec.Status)
	case rec.RolledBackBy != "":
		return nil, fmt.Errorf("run %s was already rolled back by run %s", rec.ID, rec.RolledBackBy)
	case rec.Trigger.Kind == Rollback:
		return nil, fmt.Errorf("run %s is a rollback (of run %s): it is not rolled back in turn; restore the tables with `table restore` if you must", rec.ID, rec.Trigger.Of)
	}
	store, err := r.Store(ctx, spec)
	if err != nil {
		return nil, err
	}
	p := &planner{r: r, store: store, spec: spec, opts: r.deltaOptions(spec), plan: &RollbackPlan{Run: rec}, byPath: map[string]int{}}
	p.specs = []*pipelines.Spec{spec}
	for _, s := range loaded {
		if s.Name == spec.Name {
			continue
		}
		if st, err := r.Store(ctx, s); err == nil && st == store {
			p.specs = append(p.specs, s)
		}
	}
	if err := p.written(ctx); err != nil {
		return nil, err
	}
	if err := p.readers(ctx); err != nil {
		return nil, err
	}
	p.order()
	return p.plan, nil
}

// readerName names a change feed reader for people: "stage merge_customers of pipeline sales".
func readerName(c jobs.Consumer) string {
	return "stage " + c.Stage + " of pipeline " + c.Pipeline
}

// allReaders lists the change feed readers of the warehouse's pipelines, each once.
func (p *planner) allReaders() []readerRef {
	var out []readerRef
	seen := map[string]bool{}
	for _, s := range p.specs {
		for _, c := range s.Consumers() {
			k := c.History.Path + "\x00" + c.AppID
			if seen[k] {
				continue
			}
			seen[k] = true
			ref := readerRef{c: c}
			if st := s.Stage(c.Stage); st != nil {
				ref.kind = st.Kind
				if cfg, ok := st.Config.(jobs.ChangeMerge); ok {
					ref.eventLog = cfg.EventLog()
				}
			}
			out = append(out, ref)
		}
	}
	return out
}

// declared finds the declaration of a table by path, preferring the run's pipeline.
func (p *planner) declared(path string) (*jobs.Table, string) {
	for _, s := range p.specs {
		for _, t := range s.Tables {
			if t.Path == path {
				return t, s.Name
			}
		}
	}
	return nil, ""
}

// keysOf names the columns that identify a row of the table at path, as the stages
// that write it know them: an upsert's or snapshot's keys, an scd1 merge's keys, an
// scd2 dimension's surrogate key (else its keys and valid_from).
func (p *planner) keysOf(path string) []string {
	for _, s := range p.specs {
		for _, st := range s.Stages {
			cfg, ok := st.Config.(jobs.RowKeyed)
			if !ok {
				continue
			}
			_, writes := cfg.Tables()
			for _, target := range writes {
				if t := s.Table(target); t != nil && t.Path == path && len(cfg.RowKeys(target)) > 0 {
					return cfg.RowKeys(target)
				}
			}
		}
	}
	return nil
}

// ingested reports whether an ingest stage writes the table at path: its txns are the
// files it loaded, which stay loaded.
func (p *planner) ingested(path string) bool {
	for _, s := range p.specs {
		for _, st := range s.Stages {
			if cfg, ok := st.Config.(*jobs.IngestConfig); ok {
				if t := s.Table(cfg.Target); t != nil && t.Path == path {
					return true
				}
			}
		}
	}
	return false
}

func (p *planner) open(ctx context.Context, path string) (*delta.Table, *delta.Snapshot, error) {
	tbl, err := delta.Open(ctx, p.store.Objects(), path, p.opts)
	if err != nil {
		return nil, nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	return tbl, snap, nil
}

// written adds the tables the run committed to: restored, or kept when they are a
// capture's history.
func (p *planner) written(ctx context.Context) error {
	rec := p.plan.Run
	type span struct {
		name, stage string
		first, last int64
	}
	var order []string
	spans := map[string]*span{}
	for i := len(rec.Stages) - 1; i >= 0; i-- {
		s := rec.Stages[i]
		if s.Kind == string(jobs.KindVacuum) {
			continue // vacuum changes no row: nothing to undo
		}
		for _, v := range s.VersionsWritten {
			sp := spans[v.Table]
			if sp == nil {
				sp = &span{name: v.Table, stage: s.Name, first: v.Version, last: v.Version}
				spans[v.Table] = sp
				order = append(order, v.Table)
			}
			sp.first, sp.last = min(sp.first, v.Version), max(sp.last, v.Version)
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("run %s changed no table: nothing to roll back", rec.ID)
	}
	histories := map[string]string{} // history path → its capture
	for _, rd := range p.allReaders() {
		if rd.kind == jobs.KindCaptureHistory {
			histories[rd.c.History.Path] = readerName(rd.c)
		}
	}
	for _, name := range order {
		sp := spans[name]
		decl := p.spec.Table(name)
		if decl == nil {
			return fmt.Errorf("run %s wrote table %s, which its definition does not declare", rec.ID, name)
		}
		_, snap, err := p.open(ctx, decl.Path)
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		t := RollbackTable{Table: name, Pipeline: p.spec.Name, Stage: sp.stage, First: sp.first, Last: sp.last,
			RestoreTo: sp.first - 1, Latest: snap.Version(), path: decl.Path}
		if capture, ok := histories[decl.Path]; ok {
			t.Action = RollbackKeep
			t.Why = fmt.Sprintf("an append-only history (%s writes it): what the run recorded in it (%s) is kept; the reversal is recorded after it", capture, versionsText(sp.first, sp.last))
			p.add(t)
			continue
		}
		if t.RestoreTo < 0 {
			return fmt.Errorf("run %s created table %s (its version 0): there is no version before it to restore", rec.ID, name)
		}
		t.Action = RollbackRestore
		t.Why = fmt.Sprintf("stage %s of the run committed versions %d..%d", sp.stage, sp.first, sp.last)
		if sp.first == sp.last {
			t.Why = fmt.Sprintf("stage %s of the run committed version %d", sp.stage, sp.first)
		}
		t.Keys = p.keysOf(decl.Path)
		t.ResetProgress = !p.ingested(decl.Path)
		if err := p.later(ctx, &t, ""); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		p.add(t)
	}
	return nil
}

func (p *planner) add(t RollbackTable) int {
	p.plan.Tables = append(p.plan.Tables, t)
	p.byPath[t.path] = len(p.plan.Tables) - 1
	return len(p.plan.Tables) - 1
}

// later lists the commits after t.Last that change data and are not by stage (the
// reader whose commits are undone): the restore would undo them too.
func (p *planner) later(ctx context.Context, t *RollbackTable, stage string) error {
	if t.Latest <= t.Last {
		return nil
	}
	tbl, err := delta.Open(ctx, p.store.Objects(), t.path, p.opts)
	if err != nil {
		return err
	}
	hist, err := tbl.History(ctx, int(t.Latest-t.Last))
	if err != nil {
		return err
	}
	t.Later = nil
	for j := len(hist) - 1; j >= 0; j-- {
		h := hist[j]
		if h.Version <= t.Last || strings.HasPrefix(h.Operation, "VACUUM") || (stage != "" && h.Lineage != nil && h.Lineage.Stage == stage) {
			continue
		}
		t.Later = append(t.Later, describeCommit(h))
	}
	return nil
}

func describeCommit(h delta.HistoryEntry) string {
	d := fmt.Sprintf("version %d (%s", h.Version, h.Operation)
	if l := h.Lineage; l != nil && l.RunID != "" {
		d += fmt.Sprintf(" by run %s, stage %s", l.RunID, l.Stage)
	} else if h.UserName != "" {
		d += " by " + h.UserName
	}
	return d + ")"
}

// order sorts the plan's tables so that a table whose readers' progress takes the
// version of another's RESTORE comes after it (kept tables first: nothing is done to
// them).
func (p *planner) order() {
	ts := p.plan.Tables
	done := map[string]bool{}
	var out []RollbackTable
	for _, t := range ts {
		if t.Action == RollbackKeep {
			out = append(out, t)
			done[t.path] = true
		}
	}
	for len(out) < len(ts) {
		moved := false
		for _, t := range ts {
			if done[t.path] {
				continue
			}
			ready := true
			for _, s := range t.Progress {
				if !done[s.sourcePath] {
					ready = false
				}
			}
			if ready {
				out = append(out, t)
				done[t.path] = true
				moved = true
			}
		}
		if !moved { // a cycle cannot be: a table is restored before its readers' targets
			for _, t := range ts {
				if !done[t.path] {
					out = append(out, t)
					done[t.path] = true
				}
			}
		}
	}
	p.plan.Tables = out
	p.byPath = map[string]int{}
	for i, t := range out {
		p.byPath[t.path] = i
	}
}
