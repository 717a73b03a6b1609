package pipelines

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// FuzzParse loads the input as a pipeline file (seeds: the examples and the invalid
// pipelines of testdata). A file is either accepted, and then compiles into a graph, or
// refused with an *Error whose every problem names the file and, when it concerns a
// node, a position in it.
func FuzzParse(f *testing.F) {
	env := func(name string) (string, bool) {
		if strings.HasPrefix(name, "SET") {
			return "value", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		testenv.MaxAlloc(t, 256<<20, func() {
			spec, err := Parse("fuzz.yaml", data, Options{LookupEnv: env})
			if err != nil {
				var perr *Error
				if !errors.As(err, &perr) || len(perr.Problems) == 0 {
					t.Fatalf("Parse error %T %q, want an *Error listing problems", err, err)
				}
				for _, p := range perr.Problems {
					if p.File != "fuzz.yaml" || p.Line < 0 || p.Col < 0 || p.Msg == "" {
						t.Fatalf("problem %+v does not name the file, a position and what is wrong", p)
					}
				}
				return
			}
			if _, err := Compile(spec, nil); err != nil {
				t.Fatalf("a pipeline Parse accepts does not compile: %v\n%s", err, data)
			}
		})
	})
}
