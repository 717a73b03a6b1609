package dag

import (
	"fmt"
	"time"
)

// State is where a node is in a run, and, for the terminal states, how a run ended.
type State string

const (
	Queued    State = "queued"    // part of the run, not started: waiting for dependencies or a slot
	Running   State = "running"   // an attempt is in progress
	Retrying  State = "retrying"  // an attempt failed; the next starts after Event.Delay
	Succeeded State = "succeeded" // terminal: an attempt returned nil
	Failed    State = "failed"    // terminal: the last attempt failed, retries exhausted or error permanent
	Skipped   State = "skipped"   // terminal: an upstream node failed, so this one never ran
	Cancelled State = "cancelled" // terminal: the run was cancelled before this node finished
)

// Terminal reports whether s is a final state of a node.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Skipped, Cancelled:
		return true
	}
	return false
}

// Event is one state change of one node.
type Event struct {
	Node  string
	State State
	// Attempt is the attempt the change is about: the one starting (Running), the one that
	// just failed (Retrying), the last one made (terminal states; 0 if the node never ran).
	// It is 0 for Queued.
	Attempt int
	Time    time.Time // from Options.Now
	// Err is the attempt's error for Retrying and Failed, a *SkippedError for Skipped, and
	// the task's error or the run context's cause for Cancelled.
	Err error
	// Delay is the wait before the next attempt, for Retrying.
	Delay time.Duration
}

// SkippedError is the error of a node skipped because an upstream node failed. Upstream
// names the failed node, which may be several edges up.
type SkippedError struct {
	Upstream string
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("skipped: upstream %q failed", e.Upstream)
}

// NodeResult is how one node ended.
type NodeResult struct {
	Name     string
	State    State     // a terminal state
	Attempts int       // attempts started; 0 if the node never ran
	Start    time.Time // when the first attempt started; zero if it never ran
	End      time.Time // when the node reached its terminal state
	Err      error     // nil if succeeded
}

// RunResult is how a run ended.
type RunResult struct {
	// Status is Cancelled if any node was cancelled, else Failed if any node failed or was
	// skipped, else Succeeded.
	Status State
	Start  time.Time
	End    time.Time
	Nodes  []NodeResult // in the graph's ready order
}

// Node returns the result of the node called name.
func (r RunResult) Node(name string) (NodeResult, bool) {
	for _, n := range r.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeResult{}, false
}
