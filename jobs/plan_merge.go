package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// MergePlan is an scd2_merge or scd1_merge run: the source's events (its change feed
// over (From-1, Through], or its snapshot at Through) folded into the target by key.
type MergePlan struct {
	Source, Target PlanTable
	SourceChanges  bool
	From, Through  int64
	// SourceTime is, for a snapshot source, the time its rows are as of: the time its
	// last snapshot load recorded, else the commit time of version Through (SeenTime).
	// It is the sequence of its rows without sequence_by, and the time keys it lacks
	// are deleted at (with sequence_by: its newest sequence_by value); a key whose
	// current version starts at or after that is deleted at SeenTime.
	SourceTime, SeenTime time.Time
	// SnapshotTimes are, for a change feed source, the times the snapshot loads among
	// its versions PriorFrom (else From) through Through recorded, by version: their
	// deletes, and without sequence_by their rows, are at that time.
	SnapshotTimes map[int64]time.Time
	// Keys, Tracked and Type1 are column names; Data are every target column the source
	// fills (all but the SCD columns and identity columns).
	Keys, Tracked, Type1, Data []string
	// SequenceBy is the source column ordering events ("": the commit timestamp);
	// SequenceType its Delta type name (timestamp, timestamp_ntz, date, or an integer).
	SequenceBy   string
	SequenceType string
	DeleteWhen   string
	// Where selects the source rows merged ("": all).
	Where string
	// Deletes: scd2_merge ignore, close or tombstone; scd1_merge ignore or delete.
	Deletes string
	// The SCD columns of an scd2_merge target (SurrogateKey may be "").
	SurrogateKey, ValidFrom, ValidTo, IsCurrent string
	// Watermark, when set, is the highest sequence merged before (microseconds, or the
	// integer), recorded with the target's last merge from the change feed.
	Watermark *int64
	// PriorFrom is, for a change feed source merged before, the first version of its
	// feed (the events merged before are those of versions PriorFrom through From-1);
	// -1 otherwise.
	PriorFrom int64
}

// mergeStart is where a merge from a change feed starts: after the last merged version,
// or at the source's change feed start on the first merge.
func mergeStart(ctx context.Context, f *flow, last int64, merged bool) (int64, error) {
	if merged {
		return last + 1, nil
	}
	from, err := f.src.ChangeDataFeedStart(ctx)
	if err != nil {
		return 0, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
	}
	return from, nil
}

// planMerge fills what both merge kinds share; it returns nil (with p up to date) when
// the source's latest version is merged.
func planMerge(ctx context.Context, p *Plan, f *flow, appID, watermarkID string, sourceChanges bool, sequenceBy, deleteWhen, where string, l *scdLayout) (*MergePlan, error) {
	latest := f.srcSnap.Version()
	p.Result.VersionsRead = []TableVersion{{Table: f.srcDecl.Name, Version: latest}}
	last, merged := f.dstSnap.TxnVersion(appID)
	if merged && last >= latest {
		p.UpToDate = true
		p.Result.Notes = append(p.Result.Notes, fmt.Sprintf("up to date: %s merged through version %d", f.srcDecl.Name, latest))
		return nil, nil
	}
	target := planTable(f.dstDecl, f.dstSnap)
	mp := &MergePlan{
		Source: planTable(f.srcDecl, f.srcSnap), Target: target, SourceChanges: sourceChanges,
		Through: latest, SourceTime: time.UnixMicro(snapshotSourceTime(f.srcSnap)).UTC(), SeenTime: f.srcSnap.Timestamp(),
		SequenceBy: sequenceBy, DeleteWhen: deleteWhen, Where: where,
		PriorFrom: -1,
	}
	if sequenceBy != "" {
		col := f.srcSnap.Schema().Field(sequenceBy)
		if col == nil {
			return nil, fmt.Errorf("source %s has no sequence_by column %s", f.srcDecl.Name, sequenceBy)
		}
		mp.SequenceType = col.Type.String()
	}
	if sourceChanges {
		if !feedOn(f.srcSnap) {
			return nil, fmt.Errorf("source %s: the change data feed is off (set %s: true)", f.srcDecl.Name, delta.PropEnableChangeDataFeed)
		}
		from, err := mergeStart(ctx, f, last, merged)
		if err != nil {
			return nil, err
		}
		mp.From, mp.PriorFrom = from, -1
		if merged {
			if start, err := f.src.ChangeDataFeedStart(ctx); err == nil && start <= last {
				mp.PriorFrom = start
			}
		}
		p.Result.ChangesRead = []ChangeRange{{Table: f.srcDecl.Name, After: from - 1, Through: latest}}
		if w, ok := f.dstSnap.TxnVersion(watermarkID); ok {
			mp.Watermark = &w
		}
		if mp.SequenceType == "" || isSequenceType(f.srcSnap.Schema().Field(sequenceBy).Type, false) {
			first := from
			if mp.PriorFrom >= 0 {
				first = mp.PriorFrom
			}
			times, err := f.src.CommitTxns(ctx, first, latest, snapshotAsOfID)
			if err != nil {
				return nil, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
			}
			for v, t := range times {
				if mp.SnapshotTimes == nil {
					mp.SnapshotTimes = map[int64]time.Time{}
				}
				mp.SnapshotTimes[v] = time.UnixMicro(t).UTC()
			}
		}
	}
	names := func(idx []int) []string {
		out := make([]string, len(idx))
		for i, c := range idx {
			out[i] = l.data[c].Name
		}
		return out
	}
	mp.Keys, mp.Tracked, mp.Type1 = names(l.spec.keys), names(l.spec.tracked), names(l.spec.type1)
	for _, c := range l.data {
		if !delta.IsIdentity(c) {
			mp.Data = append(mp.Data, c.Name)
		}
	}
	p.Txn = &PlanTxn{Table: target, AppID: appID, Version: latest}
	return mp, nil
}

// Plan implements Planner.
func (s *SCD2Merge) Plan(ctx context.Context, env *Env) (*Plan, error) {
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return nil, err
	}
	l, err := s.layout(f.dstSnap.Schema())
	if err != nil {
		return nil, fmt.Errorf("dimension %s: %w", f.dstDecl.Name, err)
	}
	p := &Plan{Stage: s.name, Kind: s.Kind(), Writes: []string{s.cfg.Target}}
	if s.cfg.NewColumns == "fill" {
		return nil, fmt.Errorf("new_columns: fill runs on the local engine only (set engine: local on the stage)")
	}
	if l.spec.ignoreNulls || l.spec.endNull || l.spec.end != SeqMax || l.spec.hasFirstFrom || l.inferred != "" {
		return nil, fmt.Errorf("ignore_null_updates, open_end, first_valid_from and columns.inferred run on the local engine only (set engine: local on the stage)")
	}
	mp, err := planMerge(ctx, p, f, s.AppID(), s.watermarkID(), s.cfg.SourceChanges, s.cfg.SequenceBy, s.cfg.DeleteWhen, s.cfg.Where, l)
	if err != nil || mp == nil {
		return p, err
	}
	mp.Deletes = l.spec.deletes
	mp.SurrogateKey, mp.ValidFrom, mp.ValidTo, mp.IsCurrent = l.sk, l.from, l.to, l.curr
	p.Merge = mp
	return p, nil
}

// Plan implements Planner.
func (s *SCD1Merge) Plan(ctx context.Context, env *Env) (*Plan, error) {
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return nil, err
	}
	l, err := s.layout(f.dstSnap.Schema())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", f.dstDecl.Name, err)
	}
	p := &Plan{Stage: s.name, Kind: s.Kind(), Writes: []string{s.cfg.Target}}
	mp, err := planMerge(ctx, p, f, s.AppID(), s.watermarkID(), s.cfg.SourceChanges, s.cfg.SequenceBy, s.cfg.DeleteWhen, s.cfg.Where, l)
	if err != nil || mp == nil {
		return p, err
	}
	mp.Deletes = or(s.cfg.Deletes, "ignore")
	mp.Tracked = nil
	for _, c := range mp.Data {
		if !contains(mp.Keys, c) {
			mp.Tracked = append(mp.Tracked, c)
		}
	}
	mp.Type1 = nil
	p.Merge = mp
	return p, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
