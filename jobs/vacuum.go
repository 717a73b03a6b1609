package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// Consumer is a stage (of any loaded pipeline) that reads a table's change feed: vacuum
// must keep the files of every version it has not read yet.
type Consumer struct {
	Pipeline string
	Stage    string
	// Source is the table whose change feed it reads; History the table holding its
	// progress txn under AppID; StartingVersion its configured first version, if any.
	Source, History *Table
	AppID           string
	StartingVersion *int64
	// Rekeys marks a fact_load reading a lookup's dimension: it re-keys the facts where
	// the dimension changed, so it reads every change (a rollback's reversal too).
	Rekeys bool
	// Snapshot marks a fact_load of a snapshot source: its facts follow the source's
	// snapshot, which it compares with the version it last loaded (that version's log)
	// and reads, when the source changed in place, by the change feed since (a rollback's
	// reversal too). Without them it reads the whole snapshot: slower, not wrong.
	Snapshot bool
}

func (c Consumer) String() string {
	return fmt.Sprintf("stage %q of pipeline %q", c.Stage, c.Pipeline)
}

// Vacuum deletes data files its tables no longer need (delta.Table.Vacuum: files neither
// live nor removed within the retention window) and, unless log_cleanup is false, expired
// log files. A retention shorter than a table's delta.deletedFileRetentionDuration is
// refused unless force. It never deletes files a change feed consumer (capture_history,
// scd1_merge / scd2_merge with source_changes) has yet to read: the vacuum is clamped to keep every version from the consumer's next start on,
// and the result names the consumer and version. A dry run lists what would go.
type Vacuum struct {
	name      string
	cfg       *VacuumConfig
	consumers []Consumer
}

// NewVacuum returns the stage for a validated config; consumers are the stages of every
// loaded pipeline that read a table's change feed (capture_history, and scd1_merge /
// scd2_merge with source_changes).
func NewVacuum(name string, cfg *VacuumConfig, consumers []Consumer) *Vacuum {
	return &Vacuum{name: name, cfg: cfg, consumers: consumers}
}

// Name implements Stage.
func (s *Vacuum) Name() string { return s.name }

// Kind implements Stage.
func (s *Vacuum) Kind() Kind { return KindVacuum }

// Run implements Stage.
func (s *Vacuum) Run(ctx context.Context, env *Env) (Result, error) {
	start := time.Now()
	var res Result
	for _, name := range s.cfg.TableNames {
		if err := s.vacuumTable(ctx, env, name, &res); err != nil {
			res.Duration = time.Since(start)
			return res, fmt.Errorf("vacuum %s: table %s: %w", s.name, name, err)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (s *Vacuum) vacuumTable(ctx context.Context, env *Env, name string, res *Result) error {
	decl, err := env.declared(name)
	if err != nil {
		return err
	}
	if ok, err := env.tableExists(ctx, decl); err != nil {
		return err
	} else if !ok {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: does not exist yet, nothing to vacuum", name))
		return nil
	}
	tbl, err := env.openDeclared(ctx, decl)
	if err != nil {
		return err
	}
	opts := delta.VacuumOptions{Force: s.cfg.Force, DryRun: s.cfg.DryRun, Lineage: env.lineage()}
	if s.cfg.Retain != nil {
		d := time.Duration(*s.cfg.Retain)
		opts.Retain = &d
	}
	keep, who, err := KeepFrom(ctx, env, s.consumers, tbl, decl)
	if err != nil {
		return err
	}
	if keep >= 0 {
		opts.KeepVersionsFrom, opts.KeepFor = &keep, who
	}
	vr, err := tbl.Vacuum(ctx, opts)
	if err != nil {
		return err
	}
	verb := "deleted"
	if vr.DryRun {
		verb = "would delete"
	}
	note := fmt.Sprintf("%s: %s %s (%d bytes), retention %s", name, verb, files(len(vr.FilesDeleted)), vr.BytesDeleted, retentionText(vr.Retention))
	if vr.FilesKept > 0 {
		note += fmt.Sprintf("; kept %s that %s still needs from version %d", files(vr.FilesKept), who, keep)
	}
	res.Notes = append(res.Notes, note)
	if vr.DryRun {
		for _, f := range vr.FilesDeleted {
			res.Notes = append(res.Notes, "  "+f)
		}
	} else {
		res.FilesDeleted += int64(len(vr.FilesDeleted))
		res.BytesDeleted += vr.BytesDeleted
	}
	if vr.EndVersion >= 0 {
		res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: name, Version: vr.EndVersion})
	}
	if !s.cfg.DryRun && (s.cfg.LogCleanup == nil || *s.cfg.LogCleanup) {
		var copts delta.CleanupOptions
		if keep >= 0 {
			copts.KeepVersionsFrom = &keep
		}
		cr, err := tbl.CleanupLogWith(ctx, copts)
		if err != nil {
			return err
		}
		if n := len(cr.FilesDeleted); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: removed %d expired log files", name, n))
		}
	}
	return nil
}

// KeepFrom returns the oldest version of the declared table decl (opened as tbl) that
// any of the consumers still has to read, or -1 when none does, and who they are: a
// vacuum keeps the files of that version on (delta.VacuumOptions.KeepVersionsFrom).
func KeepFrom(ctx context.Context, env *Env, consumers []Consumer, tbl *delta.Table, decl *Table) (int64, string, error) {
	keep := int64(-1)
	var who []string
	for _, c := range consumers {
		if c.Source.Path != decl.Path {
			continue
		}
		next, err := c.nextVersion(ctx, env, tbl)
		if err != nil {
			return 0, "", fmt.Errorf("find what %s still needs: %w", c, err)
		}
		if c.Snapshot && next > 0 {
			next-- // (it opens the version it last loaded too: its log is kept)
		}
		if keep < 0 || next < keep {
			keep = next
		}
		who = append(who, c.String())
	}
	return keep, strings.Join(who, ", "), nil
}

// nextVersion is the first source version the consumer's next run reads.
func (c Consumer) nextVersion(ctx context.Context, env *Env, src *delta.Table) (int64, error) {
	if ok, err := env.tableExists(ctx, c.History); err != nil {
		return 0, err
	} else if ok {
		h, err := delta.Open(ctx, env.Warehouse, c.History.Path, env.Delta)
		if err != nil {
			return 0, err
		}
		snap, err := h.Snapshot(ctx)
		if err != nil {
			return 0, err
		}
		if last, ok := snap.TxnVersion(c.AppID); ok {
			return last + 1, nil
		}
	}
	if c.StartingVersion != nil {
		return *c.StartingVersion, nil
	}
	latest, err := src.Snapshot(ctx)
	if err != nil {
		return 0, err
	}
	if c.Snapshot {
		return latest.Version() + 1, nil // (its first run reads the snapshot it finds)
	}
	if !feedOn(latest) {
		return latest.Version(), nil
	}
	return src.ChangeDataFeedStart(ctx)
}

func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// retentionText writes a retention as a person would: whole days or hours as such
// ("90 days", "168 hours" is "7 days"), anything else as a Go duration.
func retentionText(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	switch {
	case d > 0 && d%(24*time.Hour) == 0:
		return unit(int64(d/(24*time.Hour)), "day")
	case d > 0 && d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	}
	return d.String()
}
