package scheduler

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Status is the state of a run or of one of its stages.
type Status string

// Run and stage states. A run goes queued → running → succeeded | failed | cancelled, or
// straight to skipped (a slot not run, with its reason); interrupted is set by whoever
// finds its heartbeat stale. A stage of a run may also end skipped (an upstream stage
// failed) or cancelled.
const (
	Queued      Status = "queued"
	Running     Status = "running"
	Succeeded   Status = "succeeded"
	Failed      Status = "failed"
	Cancelled   Status = "cancelled"
	Skipped     Status = "skipped"
	Interrupted Status = "interrupted"
)

// Active reports whether a run in this state may still change: queued or running.
func (s Status) Active() bool { return s == Queued || s == Running }

// TriggerKind says what asked for a run.
type TriggerKind string

// Trigger kinds.
const (
	Scheduled TriggerKind = "scheduled" // a slot of the schedule, on time
	Catchup   TriggerKind = "catchup"   // a slot missed while no scheduler ran
	Manual    TriggerKind = "manual"    // a person: orchestrator run, runs trigger
	Backfill  TriggerKind = "backfill"  // runs backfill, for a past slot
	Retry     TriggerKind = "retry"     // runs retry of run Of
	Rollback  TriggerKind = "rollback"  // runs rollback of run Of
)

// Trigger is what asked for a run and with which values.
type Trigger struct {
	Kind TriggerKind `json:"kind"`
	// Slot is the scheduled instant (scheduled, catchup, backfill runs, and retries of
	// them); a manual run's slot is its trigger time.
	Slot time.Time `json:"slot,omitzero"`
	// By is who asked (user@host), for runs a person started.
	By string `json:"by,omitempty"`
	// Of is the run a retry or rollback is of.
	Of string `json:"of,omitempty"`
	// Params are the values given for the pipeline's parameters (defaults fill the rest:
	// the record's Params).
	Params map[string]string `json:"params,omitempty"`
	// Stages, when set, are the only stages run (run --stage, and a retry's stages).
	Stages []string `json:"stages,omitempty"`
}

// Heartbeat is the latest sign of life of the process running a run.
type Heartbeat struct {
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Instance string    `json:"instance"` // one per scheduler or CLI process
	Time     time.Time `json:"time"`
}

// Record is everything remembered of one run. It is stored whole, as JSON, as its
// state changes (the changes that come while it is being written, together).
type Record struct {
	ID       string `json:"id"`
	Pipeline string `json:"pipeline"`
	// Seq is the run's position in its pipeline's index.
	Seq     int64   `json:"seq"`
	Trigger Trigger `json:"trigger"`
	// Attempt counts the runs of this id: a slot run again after an interruption, or a
	// backfill --rerun, is attempt 2.
	Attempt int               `json:"attempt"`
	Params  map[string]string `json:"params,omitempty"`
	// File, DefinitionHash and Definition are the pipeline file as the run read it (its
	// ${VAR} references unexpanded), so an old run shows its DAG as it was.
	File           string `json:"file,omitempty"`
	DefinitionHash string `json:"definition_hash,omitempty"`
	Definition     string `json:"definition,omitempty"`

	Status Status `json:"status"`
	// Reason says why a run was skipped, interrupted or cancelled.
	Reason string `json:"reason,omitempty"`
	// Error is why it failed, or what kept it from starting.
	Error     string     `json:"error,omitempty"`
	Created   time.Time  `json:"created"`
	Start     time.Time  `json:"start,omitzero"`
	End       time.Time  `json:"end,omitzero"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`

	Stages        []StageRecord `json:"stages,omitempty"`
	Notifications []Delivery    `json:"notifications,omitempty"`
	// Lineage is the delivery of the run's OpenLineage events (pipelines with lineage).
	Lineage *LineageDelivery `json:"lineage,omitempty"`

	// SkippedThrough, on a skipped slot's record, is the last of a range of slots skipped
	// with it for the same reason (only slots beyond maxSkipRecords are folded so).
	SkippedThrough time.Time `json:"skipped_through,omitzero"`
	SkippedCount   int       `json:"skipped_count,omitempty"`

	// RetriedBy and RolledBackBy link to the runs that retried or rolled back this one
	// (they name this run in Trigger.Of); RetryStatus is the state of the newest retry,
	// kept up to date as it runs and ends.
	RetriedBy    []string `json:"retried_by,omitempty"`
	RetryStatus  Status   `json:"retry_status,omitempty"`
	RolledBackBy string   `json:"rolled_back_by,omitempty"`

	// Attempts are the earlier attempts of this id (a slot run again after an
	// interruption, a backfill's rerun), oldest first; the record's own fields are the
	// newest attempt's.
	Attempts []RunAttempt `json:"attempts,omitempty"`
	// Notes are remarks on the run as a whole (what a rollback did with each table and
	// reader).
	Notes []string `json:"notes,omitempty"`
}

// RunAttempt is an earlier attempt of a run: when it ran, how it ended and why, its
// process and what its stages did.
type RunAttempt struct {
	N         int           `json:"n"`
	Trigger   TriggerKind   `json:"trigger"`
	Status    Status        `json:"status"`
	Reason    string        `json:"reason,omitempty"`
	Error     string        `json:"error,omitempty"`
	Start     time.Time     `json:"start,omitzero"`
	End       time.Time     `json:"end,omitzero"`
	Heartbeat *Heartbeat    `json:"heartbeat,omitempty"`
	Stages    []StageRecord `json:"stages,omitempty"`
}

// startNewAttempt keeps the record's current attempt in Attempts (its stages without
// their log lines, which the stage log objects keep) and clears what the next attempt
// sets.
func (r *Record) startNewAttempt() {
	a := RunAttempt{N: r.Attempt, Trigger: r.Trigger.Kind, Status: r.Status, Reason: r.Reason, Error: r.Error,
		Start: r.Start, End: r.End, Heartbeat: r.Heartbeat}
	for _, s := range r.Stages {
		s.Log, s.Operations = nil, nil
		a.Stages = append(a.Stages, s)
	}
	r.Attempts = append(r.Attempts, a)
	r.Attempt++
	r.Stages, r.Error, r.End, r.Start = nil, "", time.Time{}, time.Time{}
}

// Interrupted reports whether the run, or one of its earlier attempts, was interrupted.
func (r *Record) Interrupted() bool {
	if r.Status == Interrupted {
		return true
	}
	for _, a := range r.Attempts {
		if a.Status == Interrupted {
			return true
		}
	}
	return false
}

// Outcome is the state of a run as a person should read it: its status, unless it
// was rolled back ("rolled back") or, having failed, retried ("retried: succeeded",
// "retried: running"...).
func Outcome(status Status, retry Status, rolledBack bool) string {
	switch {
	case rolledBack:
		return "rolled back"
	case retry != "" && status != Succeeded && !status.Active():
		return "retried: " + string(retry)
	}
	return string(status)
}

// Stage returns the stage called name, or nil.
func (r *Record) Stage(name string) *StageRecord {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return &r.Stages[i]
		}
	}
	return nil
}

// StageRecord is one stage of a run.
type StageRecord struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	DependsOn []string  `json:"depends_on,omitempty"`
	Status    Status    `json:"status"`
	Attempts  []Attempt `json:"attempts,omitempty"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	// Error is the last attempt's error, or why the stage did not run. Reason says why a
	// stage was cancelled or skipped (that is no error).
	Error       string `json:"error,omitempty"`
	Reason      string `json:"reason,omitempty"`
	RowsIn      int64  `json:"rows_in"`
	RowsOut     int64  `json:"rows_out"`
	RowsSkipped int64  `json:"rows_skipped,omitempty"`
	// Conflicts counts the commits the stage lost to concurrent writers (it ran again).
	Conflicts int `json:"conflicts,omitempty"`
	// VersionsRead and VersionsWritten are the table versions the stage read and
	// committed; ChangesRead the change feed ranges (After, Through] it read.
	VersionsRead    []TableVersion `json:"versions_read,omitempty"`
	VersionsWritten []TableVersion `json:"versions_written,omitempty"`
	ChangesRead     []ChangeRange  `json:"changes_read,omitempty"`
	Notes           []string       `json:"notes,omitempty"`
	// Log holds the stage's last log lines (at most maxLogLines); when there were more,
	// LogDropped counts those left out here and LogObject names the object with them all.
	Log        []string `json:"log,omitempty"`
	LogDropped int      `json:"log_dropped,omitempty"`
	LogObject  string   `json:"log_object,omitempty"`
	// Progress is what the stage reported last while it ran (rows and bytes read, files,
	// passes over its memory budget, MERGE parts).
	Progress *StageProgress `json:"progress,omitempty"`
	// Engine is where the stage ran ("local" or "spark"; empty in records made before
	// engines existed), and Operations the statements it sent there.
	Engine     string      `json:"engine,omitempty"`
	Operations []Operation `json:"operations,omitempty"`
	// Checks are the results of the stage's expectations (expect.go).
	Checks []Check `json:"checks,omitempty"`
}

// Operation is one statement a stage sent to Spark: the SQL, the session and operation
// ids Spark knows it by (to find it in Spark's UI or interrupt it), the table version it
// committed (-1: none) and the operation metrics Delta recorded with that commit.
type Operation struct {
	SQL         string            `json:"sql"`
	SessionID   string            `json:"session_id,omitempty"`
	OperationID string            `json:"operation_id,omitempty"`
	Table       string            `json:"table,omitempty"`
	Version     int64             `json:"version"`
	Metrics     map[string]string `json:"metrics,omitempty"`
}

// Attempt is one try of a stage.
type Attempt struct {
	N     int       `json:"n"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	Error string    `json:"error,omitempty"`
	// Cancelled: the attempt was stopped by a cancel (Error is then empty).
	Cancelled bool `json:"cancelled,omitempty"`
}

// TableVersion is a version of a declared table.
type TableVersion struct {
	Table   string `json:"table"`
	Version int64  `json:"version"`
}

// ChangeRange is a range of a table's change feed: versions After (exclusive) through
// Through (inclusive).
type ChangeRange struct {
	Table   string `json:"table"`
	After   int64  `json:"after"`
	Through int64  `json:"through"`
}

// Delivery is the outcome of one notification.
type Delivery struct {
	URL      string    `json:"url"` // as written in the pipeline: ${VAR} references unexpanded
	Event    string    `json:"event"`
	Time     time.Time `json:"time"`
	Status   int       `json:"status,omitempty"` // HTTP status of the last try
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"`
}

// Run ids. A slot's id is its pipeline and the slot's instant in UTC; any other run's id
// adds a random suffix to its creation time; a retry's is the id of the run it retries
// with -rN (its Nth retry), so that of two requests for one retry only one claims it.
const idTime = "20060102T150405Z"

var idRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*)@(\d{8}T\d{6}Z)(-[a-z0-9]{6})?((?:-r[1-9][0-9]{0,3})*)$`)

// SlotID is the run id of a pipeline's slot.
func SlotID(pipeline string, slot time.Time) string {
	return pipeline + "@" + slot.UTC().Format(idTime)
}

// NewID is a fresh id for a run that is not a slot's, created at now.
func NewID(pipeline string, now time.Time) string {
	return pipeline + "@" + now.UTC().Format(idTime) + "-" + strings.ToLower(rand.Text()[:6])
}

// ParseID splits a run id into its pipeline and whether it names a slot.
func ParseID(id string) (pipeline string, slot bool, err error) {
	m := idRE.FindStringSubmatch(id)
	if m == nil {
		return "", false, fmt.Errorf("invalid run id %q: expected PIPELINE@20060102T150405Z (a slot) or PIPELINE@20060102T150405Z-abc123", id)
	}
	return m[1], m[3] == "" && m[4] == "", nil
}

// RetryID is the id of the nth retry of run id.
func RetryID(id string, n int) string { return fmt.Sprintf("%s-r%d", id, n) }

// cloneRecord returns a deep copy of r.
func cloneRecord(r *Record) *Record {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("scheduler: a record does not marshal: %v", err)) // only plain data
	}
	var c Record
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("scheduler: a record does not unmarshal: %v", err))
	}
	return &c
}
