package jobs

import (
	"context"
	"fmt"
	"time"
)

// IngestPlan is an ingest run: the source files not loaded yet, each with the txn that
// records it as loaded, and how to read them.
type IngestPlan struct {
	Target PlanTable
	// Files are the new files in name order. Name is the file's location as the
	// pipeline writes locations (the source glob with the match filled in), which is
	// also what the source_file column holds.
	Files []PlanFile
	// Format is csv, ndjson or parquet (per file when the config leaves it to the
	// extension: PlanFile.Format).
	Mode, SequenceBy, DeleteWhen string
	Keys                         []string
	CSV                          CSVOptions
	SourceFileColumn             string
	LoadTimestampColumn          string
	LoadTime                     time.Time
	OnError                      string
	AllowMissingColumns          bool
	QuarantineTable              string
}

// PlanFile is one source file of an ingest plan and the txn that records it as loaded.
type PlanFile struct {
	Name, Format string
	Size         int64
	TxnID        string
	TxnVersion   int64
}

// Plan implements Planner: the files of the source the target's log has no txn for.
func (s *Ingest) Plan(ctx context.Context, env *Env) (*Plan, error) {
	decl, err := env.declared(s.cfg.Target)
	if err != nil {
		return nil, err
	}
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		return nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	p := &Plan{Stage: s.name, Kind: s.Kind(), Writes: []string{s.cfg.Target}}
	var files []*sourceFile
	if isURL(s.cfg.Source) {
		f, err := fetchURL(ctx, env, decl.Name, s.cfg.Source, s.cfg.HTTP)
		if err != nil {
			return nil, err
		}
		files = []*sourceFile{f}
	} else if files, err = listSources(ctx, env, decl.Name, s.cfg.Source); err != nil {
		return nil, err
	}
	target := planTable(decl, snap)
	ip := &IngestPlan{
		Target: target, Mode: or(s.cfg.Mode, "append"), SequenceBy: s.cfg.SequenceBy, DeleteWhen: s.cfg.DeleteWhen,
		Keys: s.cfg.Keys, CSV: s.cfg.CSV, SourceFileColumn: s.sourceFileColumn(), LoadTimestampColumn: s.loadTimeColumn(),
		LoadTime: env.Now().UTC().Truncate(time.Microsecond), OnError: or(s.cfg.OnError, "fail"),
		AllowMissingColumns: s.cfg.AllowMissingColumns, QuarantineTable: s.cfg.QuarantineTable,
	}
	for _, f := range files {
		if v, ok := snap.TxnVersion(f.ID); ok && (!isURL(f.Name) || v == f.Version) {
			continue
		}
		ip.Files = append(ip.Files, PlanFile{Name: f.Name, Format: string(s.format(f.Name)), Size: f.Size, TxnID: f.ID, TxnVersion: f.Version})
	}
	if skipped := len(files) - len(ip.Files); skipped > 0 {
		p.Result.Notes = append(p.Result.Notes, fmt.Sprintf("%d of %d source files already loaded", skipped, len(files)))
	}
	if len(ip.Files) == 0 {
		if len(files) == 0 {
			p.Result.Notes = append(p.Result.Notes, "no source files match "+s.cfg.Source)
		}
		p.UpToDate = true
		return p, nil
	}
	p.Ingest = ip
	return p, nil
}
