package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/spilldir"
)

// spillSweepEvery is how often serve removes the spill directories of processes gone.
const spillSweepEvery = 5 * time.Minute

// sweepSpill removes the spill directories (under --spill-dir, else the system's
// temporary directory) that a process killed while its stage was over its memory
// budget left behind, and logs each: run and serve call it when they start, serve
// every spillSweepEvery.
func sweepSpill(so stageOptions, log *slog.Logger) {
	base := so.spillDir
	if base == "" {
		base = os.TempDir()
	}
	removed, err := spilldir.Sweep(base)
	for _, r := range removed {
		if r.Owner.PID > 0 {
			log.Info("removed the spill directory of a process that is gone", "dir", r.Dir, "host", r.Owner.Host, "pid", r.Owner.PID, "bytes", r.Bytes)
		} else {
			log.Info("removed a spill directory a day old without an owner", "dir", r.Dir, "bytes", r.Bytes)
		}
	}
	if err != nil {
		log.Warn("remove spill directories", "err", err)
	}
}
