package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// The readers' part of a rollback plan: the change feed readers of every restored table
// (capture histories and merges from a change feed) and what each needs, by the
// rules at the top of rollback_plan.go.

// readers goes through the change feed readers of every restored table (those
// restored because of a reader, in turn): see the rules at the top of rollback_plan.go.
func (p *planner) readers(ctx context.Context) error {
	refs := p.allReaders()
	for i := 0; i < len(p.plan.Tables); i++ { // grows as readers' targets are restored
		src := p.plan.Tables[i]
		if src.Action != RollbackRestore {
			continue
		}
		for _, rd := range refs {
			if rd.c.Source.Path != src.path {
				continue
			}
			if err := p.reader(ctx, src, rd); err != nil {
				return fmt.Errorf("%s: %w", rd.c, err)
			}
		}
	}
	return nil
}

// txnAt returns the reader's progress in a table's snapshot.
func txnPtr(snap *delta.Snapshot, appID string) *int64 {
	if v, ok := snap.TxnVersion(appID); ok {
		return &v
	}
	return nil
}

func (p *planner) reader(ctx context.Context, src RollbackTable, rd readerRef) error {
	c := rd.c
	out := RollbackReader{Pipeline: c.Pipeline, Stage: c.Stage, Kind: string(rd.kind), Source: c.Source.Name, Target: c.History.Name}
	var read *int64
	exists, err := delta.Exists(ctx, p.store.Objects(), c.History.Path)
	if err != nil {
		return fmt.Errorf("table %s: %w", c.History.Name, err)
	}
	if exists { // else not created yet: it read nothing
		_, dst, err := p.open(ctx, c.History.Path)
		if err != nil {
			return fmt.Errorf("table %s: %w", c.History.Name, err)
		}
		read = txnPtr(dst, c.AppID)
	}
	out.ReadThrough = read
	through := "has read nothing yet"
	if read != nil {
		through = fmt.Sprintf("has read %s through version %d", c.Source.Name, *read)
	}
	if c.Rekeys {
		// Its facts are keyed by whatever versions the dimension holds when it looks:
		// the run's changes and their reversal name the ranges to look up again.
		out.Action = ReaderRekeys
		out.Detail = fmt.Sprintf("it %s; at its next run it reads the run's changes and their reversal (the RESTORE's net changes) and re-keys the facts whose time falls in them by the restored versions", through)
		p.plan.Readers = append(p.plan.Readers, out)
		return nil
	}
	if c.Snapshot {
		out.Action = ReaderFollows
		out.Detail = fmt.Sprintf("it %s; its facts follow %s's snapshot: at its next run it reads the run's changes and their reversal (the RESTORE's net changes), or the whole snapshot, and its facts end as the restored source's", through, c.Source.Name)
		p.plan.Readers = append(p.plan.Readers, out)
		return nil
	}
	if rd.kind == jobs.KindCaptureHistory {
		out.Action = ReaderRecordsReversal
		if read != nil && *read >= src.First {
			out.Detail = fmt.Sprintf("it %s, the run's changes included; at its next run it records their reversal (the RESTORE's net changes) in %s", through, c.History.Name)
		} else {
			out.Detail = fmt.Sprintf("it %s; at its next run it records the run's changes and their reversal (the RESTORE's net changes) in %s, each once", through, c.History.Name)
		}
		p.plan.Readers = append(p.plan.Readers, out)
		return nil
	}

	// A merge: it must not see the run's versions nor their reversal.
	start := func() (int64, error) {
		if c.StartingVersion != nil {
			return *c.StartingVersion, nil
		}
		_, s, err := p.open(ctx, src.path)
		if err != nil {
			return 0, err
		}
		return s.Table().ChangeDataFeedStart(ctx)
	}
	next := func(v *int64) (int64, error) {
		if v != nil {
			return *v + 1, nil
		}
		return start()
	}
	notExact := func(problem string) {
		out.Action, out.Problem = ReaderNotExact, problem
		out.Detail = fmt.Sprintf("it %s; with --force it is left as it is, and reads the run's versions and their reversal at its next run", through)
		p.plan.Readers = append(p.plan.Readers, out)
	}
	set := ProgressSet{AppID: c.AppID, Reader: readerName(c), Source: src.Table, sourcePath: src.path}
	if read == nil || *read < src.First {
		n, err := next(read)
		if err != nil {
			return err
		}
		if n < src.First {
			if changed, err := p.rowsChanged(ctx, src.path, n, src.First-1); err != nil || changed {
				notExact(fmt.Sprintf("it has %s of %s, from before the run, still to read: it would read them with the run's versions and their reversal", versionsText(n, src.First-1), c.Source.Name))
				return nil
			}
			// Nothing to read there (the table's creation): skipping it loses nothing.
		}
		out.Action = ReaderSkips
		out.Detail = fmt.Sprintf("it %s, not the run's versions: its progress is set to the RESTORE of %s, so it never reads them", through, c.Source.Name)
		p.progress(ctx, c.History, set, "the progress of "+readerName(c))
		if rd.eventLog != "" {
			if ok, _ := delta.Exists(ctx, p.store.Objects(), rd.eventLog); ok {
				p.progress(ctx, &jobs.Table{Name: "event log of " + readerName(c), Path: rd.eventLog}, set, "the progress of "+readerName(c))
			}
		}
		p.plan.Readers = append(p.plan.Readers, out)
		return nil
	}
	// It read the run's versions: back to before its first read of them.
	d0, at0, err := p.before(ctx, c.History.Path, c.AppID, src.First)
	if err != nil {
		return err
	}
	if d0 < 0 {
		notExact(fmt.Sprintf("%s has no version from before its first read of the run's versions", c.History.Name))
		return nil
	}
	n, err := next(at0)
	if err != nil {
		return err
	}
	if n < src.First {
		if changed, err := p.rowsChanged(ctx, src.path, n, src.First-1); err != nil || changed {
			notExact(fmt.Sprintf("it read %s of %s, from before the run, in the same commit (version %d of %s) as the run's", versionsText(n, src.First-1), c.Source.Name, d0+1, c.History.Name))
			return nil
		}
	}
	var e0 int64 = -1
	logExists := false
	if rd.eventLog != "" {
		if logExists, err = delta.Exists(ctx, p.store.Objects(), rd.eventLog); err != nil {
			return err
		}
		if logExists {
			if e0, _, err = p.before(ctx, rd.eventLog, c.AppID, src.First); err != nil {
				return err
			}
			if e0 < 0 {
				notExact("its event log has no version from before it logged the run's events")
				return nil
			}
		}
	}
	out.Action = ReaderRolledBack
	out.Detail = fmt.Sprintf("it %s, the run's versions included: %s is restored to version %d (before it read them) and its progress set to the RESTORE of %s", through, c.History.Name, d0, c.Source.Name)
	why := fmt.Sprintf("%s read the run's versions of %s (through version %d)", readerName(c), c.Source.Name, *read)
	if err := p.restoreReader(ctx, c.History, d0, c.Stage, why, set); err != nil {
		return err
	}
	if logExists {
		if err := p.restoreReader(ctx, &jobs.Table{Name: "event log of " + readerName(c), Path: rd.eventLog}, e0, c.Stage, why+": its event log goes back with it", set); err != nil {
			return err
		}
	}
	p.plan.Readers = append(p.plan.Readers, out)
	return nil
}

// rowsChanged reports whether the change feed of versions from..to of the table at path
// holds a row (it reads up to the first one). Versions it cannot read count as changed.
func (p *planner) rowsChanged(ctx context.Context, path string, from, to int64) (bool, error) {
	if from > to {
		return false, nil
	}
	tbl, err := delta.Open(ctx, p.store.Objects(), path, p.opts)
	if err != nil {
		return true, err
	}
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &from, EndVersion: &to})
	if err != nil {
		return true, err
	}
	defer r.Release()
	for r.Next() {
		if r.RecordBatch().NumRows() > 0 {
			return true, nil
		}
	}
	return false, r.Err()
}

// versionsText names a range of versions: "version 3", "versions 3..5".
func versionsText(from, to int64) string {
	if from == to {
		return fmt.Sprintf("version %d", from)
	}
	return fmt.Sprintf("versions %d..%d", from, to)
}

// before returns the newest version of the table at path whose txn appID is before
// first (or absent), with that txn; -1 when every version has read from first on.
func (p *planner) before(ctx context.Context, path, appID string, first int64) (int64, *int64, error) {
	tbl, snap, err := p.open(ctx, path)
	if err != nil {
		return 0, nil, err
	}
	for v := snap.Version(); v >= 0; v-- {
		s := snap
		if v != snap.Version() {
			if s, err = tbl.SnapshotAt(ctx, v); err != nil {
				if errors.Is(err, delta.ErrVersionCleaned) {
					return -1, nil, nil
				}
				return 0, nil, err
			}
		}
		if at := txnPtr(s, appID); at == nil || *at < first {
			return v, at, nil
		}
	}
	return -1, nil, nil
}

// restoreReader plans the restore of a reader's target (or event log) to version to,
// with its progress set to the source's RESTORE; a table already in the plan is
// restored to the older of the two versions.
func (p *planner) restoreReader(ctx context.Context, decl *jobs.Table, to int64, stage, why string, set ProgressSet) error {
	if i, ok := p.byPath[decl.Path]; ok {
		t := &p.plan.Tables[i]
		switch t.Action {
		case RollbackRestore:
			t.RestoreTo = min(t.RestoreTo, to)
			t.First = t.RestoreTo + 1
			t.ResetProgress = true
			t.Why += "; " + why
			t.Progress = append(t.Progress, set)
			return p.later(ctx, t, stage)
		case RollbackProgress: // cannot be: a table either was read past or not
		}
		return nil
	}
	_, snap, err := p.open(ctx, decl.Path)
	if err != nil {
		return fmt.Errorf("table %s: %w", decl.Name, err)
	}
	name, pipeline, internal := decl.Name, "", true
	if d, pl := p.declared(decl.Path); d != nil {
		name, pipeline, internal = d.Name, pl, false
	}
	t := RollbackTable{Table: name, Pipeline: pipeline, Internal: internal, Action: RollbackRestore, Why: why, First: to + 1, Last: snap.Version(),
		RestoreTo: to, Latest: snap.Version(), Keys: p.keysOf(decl.Path), ResetProgress: true, Progress: []ProgressSet{set}, path: decl.Path}
	if err := p.later(ctx, &t, stage); err != nil {
		return fmt.Errorf("table %s: %w", name, err)
	}
	p.add(t)
	return nil
}

// progress plans a progress-only commit to a reader's target (it had not read the
// run's versions).
func (p *planner) progress(ctx context.Context, decl *jobs.Table, set ProgressSet, why string) {
	if i, ok := p.byPath[decl.Path]; ok {
		t := &p.plan.Tables[i]
		t.Progress = append(t.Progress, set)
		return
	}
	name, pipeline, internal := decl.Name, "", true
	if d, pl := p.declared(decl.Path); d != nil {
		name, pipeline, internal = d.Name, pl, false
	}
	latest := int64(-1)
	if _, snap, err := p.open(ctx, decl.Path); err == nil {
		latest = snap.Version()
	}
	p.add(RollbackTable{Table: name, Pipeline: pipeline, Internal: internal, Action: RollbackProgress, Why: why + " moves past the run's versions of " + set.Source,
		First: -1, Last: -1, RestoreTo: -1, Latest: latest, Progress: []ProgressSet{set}, path: decl.Path})
}
