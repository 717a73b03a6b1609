package jobs

import (
	"errors"

	"github.com/orchestrator-io/orchestrator/jobs/decode"
)

// Permanent reports whether a stage's error is one a retry would meet again, as it
// comes from the stage's input or declaration rather than from the moment: a record
// of a source file that does not parse (decode.Error), a row of a keyed batch that
// cannot be placed (a key twice without sequence_by, a null sequence), a table that
// differs from its declaration (DifferenceError), or a batch with one key and sequence
// twice. The scheduler does not retry them: the run fails at once, naming the problem.
func Permanent(err error) bool {
	var de *decode.Error
	var rp *rowProblem
	var diff *DifferenceError
	var dup *DuplicateSequenceError
	return errors.As(err, &de) || errors.As(err, &rp) || errors.As(err, &diff) || errors.As(err, &dup)
}
