package jobs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// DefaultMemoryBudget is the memory budget of an ingest in upsert or snapshot mode, an
// scd1_merge or an scd2_merge that neither its config nor the environment sets.
const DefaultMemoryBudget ByteSize = 1 << 30

// ByteSize is an amount of memory, written in YAML and on the command line as bytes or
// with a unit: 512MiB, 1GiB, 1.5GB, 64KiB, 100MB (KB, MB, GB are powers of 1000; KiB,
// MiB, GiB powers of 1024).
type ByteSize int64

// ParseByteSize reads a ByteSize.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	end := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(t)
	}
	num, unit := t[:end], strings.ToUpper(strings.TrimSpace(t[end:]))
	if num == "" || strings.HasSuffix(num, ".") || strings.HasPrefix(num, ".") {
		return 0, fmt.Errorf("invalid size %q: expected e.g. 1GiB, 512MiB or 2GB", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil {
		return 0, fmt.Errorf("invalid size %q: expected e.g. 1GiB, 512MiB or 2GB", s)
	}
	if v*mult >= 1<<62 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return ByteSize(v * mult), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (used by YAML decoding and flags).
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// String shows the size in the largest binary unit that divides it (1GiB, 1536MiB).
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		n    ByteSize
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatInt(int64(b/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// Set implements flag.Value.
func (b *ByteSize) Set(s string) error { return b.UnmarshalText([]byte(s)) }

// validateBudget reports a memory_budget that is set but not positive.
func validateBudget(b ByteSize) []FieldError {
	if b < 0 {
		return []FieldError{{"memory_budget", fmt.Sprintf("must be positive, got %d", b)}}
	}
	return nil
}

// budget is the memory budget of a stage: its own (the config's memory_budget), else
// the environment's, else DefaultMemoryBudget.
func (e *Env) budget(own ByteSize) int64 {
	switch {
	case own > 0:
		return int64(own)
	case e.MemoryBudget > 0:
		return int64(e.MemoryBudget)
	}
	return int64(DefaultMemoryBudget)
}

// keyedRun starts the keyed run (jobs/internal/keyed) of a stage whose config's budget
// is own: its working set, spill directory and progress; the budget counts in the
// process's memory limit until end is called, which also removes the spill files.
func (e *Env) keyedRun(own ByteSize) (run *keyed.Run, end func()) {
	budget := e.budget(own)
	release := keyed.HoldBudget(budget)
	run = &keyed.Run{Limit: keyed.WorkingSet(budget), SpillDir: e.SpillDir,
		OnPass: func(pass, passes int) { reportPass(e, pass, passes) },
		OnPart: func(parts int) { reportPart(e, parts) }}
	return run, func() {
		run.Close()
		release()
	}
}

// heldAfterRead is told, for a keyed run whose batch stayed in memory, what its live pass
// held by the stage's estimates once the input was read, and its rows (a benchmark
// compares it with the heap the run took).
var heldAfterRead = func(kind string, held, rows int64) {}

// noteHeld tells heldAfterRead of batch (nothing when it went to spill files).
func noteHeld(kind string, batch *keyed.Batch) {
	if live := batch.Live(); live != nil {
		heldAfterRead(kind, live.Held(), batch.Rows())
	}
}
