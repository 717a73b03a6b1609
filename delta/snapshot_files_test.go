package delta

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// The sorted live files computed from a base and the adds applied since equal a sort of
// the live files, whatever adds, re-adds (same or new action), removes and DV changes
// follow, and over several generations of snapshots (each the base of the next).
func TestSortedFilesFromBaseMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 200; round++ {
		st := newTableState()
		var base []*Add
		for i := 0; i < rng.Intn(40); i++ {
			a := &Add{Path: fmt.Sprintf("f%03d", rng.Intn(60))}
			st.apply(&Action{Add: a})
		}
		base = sortAdds(st.files)
		st.setBase(base)
		for gen := 0; gen < 3; gen++ {
			for op := 0; op < rng.Intn(30); op++ {
				p := fmt.Sprintf("f%03d", rng.Intn(60))
				switch rng.Intn(4) {
				case 0, 1:
					a := &Add{Path: p}
					if rng.Intn(4) == 0 {
						a.DeletionVector = &DeletionVector{StorageType: "i", PathOrInlineDv: fmt.Sprint(rng.Intn(3))}
					}
					st.apply(&Action{Add: a})
				case 2:
					st.apply(&Action{Remove: &Remove{Path: p}})
				case 3: // the same action applied again
					for _, a := range st.files {
						st.apply(&Action{Add: a})
						break
					}
				}
			}
			got, want := st.sortedFiles(), sortAdds(st.files)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d gen %d: sorted files differ:\ngot  %v\nwant %v", round, gen, paths(got), paths(want))
			}
			next := st.clone()
			next.setBase(got)
			st = next
		}
	}
}

func paths(adds []*Add) []string {
	out := make([]string, len(adds))
	for i, a := range adds {
		out[i] = a.Path + "#" + a.DeletionVector.UniqueID()
	}
	return out
}
