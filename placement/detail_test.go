package placement

import "testing"

// A price cap rejects the pools above it and never lets one win: a winner
// above the cap gives way to the cheapest eligible pool under it; none
// under it that matches is unplaceable; all of those saturated, saturated.
func TestCapPrice(t *testing.T) {
	cands := func() []Candidate {
		return []Candidate{
			{Region: "a", Pool: "cheap-far", Price: 0.01, Cost: 0.5},
			{Region: "a", Pool: "dear-won", Price: 0.05, Cost: 0.2, Won: true},
			{Region: "a", Pool: "mid", Price: 0.02, Cost: 0.3},
			{Region: "a", Pool: "gpu", Price: 0.001, Reason: ReasonTagMismatch},
		}
	}
	ex := Explanation{Candidates: cands(), Decision: Decision{Region: "a", Pool: "dear-won", OK: true, outcome: placed}}
	ex.CapPrice(0.03)
	if !ex.Decision.OK || ex.Decision.Pool != "mid" || !ex.Candidates[2].Won || ex.Candidates[1].Won ||
		ex.Candidates[1].Reason != ReasonOverPriceCap || ex.Candidates[1].Detail != "$0.05/h > max_price_per_slot_hour $0.03/h" {
		t.Fatalf("cap 0.03: %+v %+v", ex.Decision, ex.Candidates)
	}
	ex = Explanation{Candidates: cands(), Decision: Decision{Region: "a", Pool: "dear-won", OK: true, outcome: placed}}
	ex.CapPrice(0.005)
	if ex.Decision.OK || !ex.Decision.Unplaceable() || ex.Candidates[3].Reason != ReasonTagMismatch {
		t.Fatalf("cap 0.005: %+v %+v", ex.Decision, ex.Candidates)
	}
	c := cands()
	c[0].Reason = ReasonSaturated
	ex = Explanation{Candidates: c, Decision: Decision{Region: "a", Pool: "dear-won", OK: true, outcome: placed}}
	ex.CapPrice(0.015)
	if ex.Decision.OK || !ex.Decision.AllSaturated() {
		t.Fatalf("cap 0.015, the one under it saturated: %+v", ex.Decision)
	}
	ex = Explanation{Candidates: cands(), Decision: Decision{Region: "a", Pool: "dear-won", OK: true, outcome: placed}}
	ex.CapPrice(0)
	if ex.Decision.Pool != "dear-won" || ex.Candidates[1].Reason != "" {
		t.Fatalf("no cap: %+v", ex.Decision)
	}
}
