package submit

import (
	"testing"

	"github.com/ax-sched/ax/placement"
)

// An unplaceable submit names why the pools were rejected: over the task's
// price cap read "no pool in any region matches this task's tags and
// regions" when every pool's tags did match.
func TestUnplaceableNamesTheReasons(t *testing.T) {
	e := &PlacementError{Explanation: placement.Explanation{Candidates: []placement.Candidate{
		{Pool: "a", Reason: placement.ReasonOverPriceCap}, {Pool: "b", Reason: placement.ReasonTagMismatch},
		{Pool: "c", Reason: placement.ReasonOverPriceCap}}}}
	if got, want := e.Error(), "no pool in any region can take this task (OVER_PRICE_CAP, TAG_MISMATCH)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got := (&PlacementError{}).Error(); got != "no pool in any region matches this task's tags and regions" {
		t.Fatalf("no candidates: %q", got)
	}
}
