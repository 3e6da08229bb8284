package handoff

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// A batch carries at most apiv1.MaxBatch words, the oldest first; the rest
// stay for the next request, in order, none lost or repeated.
func TestTargetTakesAtMostABatchOfWords(t *testing.T) {
	tg := &target{}
	const n = 2*apiv1.MaxBatch + 7
	for i := range n {
		tg.words = append(tg.words, fmt.Sprint(i))
	}
	var got []string
	for len(tg.words) > 0 {
		w := tg.take()
		if len(w) == 0 || len(w) > apiv1.MaxBatch {
			t.Fatalf("a batch carries %d words, want 1 to %d", len(w), apiv1.MaxBatch)
		}
		// A word recorded while the request is on its way lands behind
		// what was left, never inside what the request carries.
		carried := slices.Clone(w)
		tg.words = append(tg.words, "late")
		if !slices.Equal(w, carried) {
			t.Fatalf("a word recorded after the take changed the request's words")
		}
		tg.words = tg.words[:len(tg.words)-1]
		got = append(got, w...)
	}
	if len(got) != n {
		t.Fatalf("took %d words, want %d", len(got), n)
	}
	for i, w := range got {
		if w != fmt.Sprint(i) {
			t.Fatalf("word %d is %s: taken out of order", i, w)
		}
	}
	if w := tg.take(); len(w) != 0 {
		t.Fatalf("nothing left, took %v", w)
	}
}
