package endpoint

import (
	"slices"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/placement"
)

// ScopeExplanation narrows a placement explanation to what a token of one
// tenant may learn (docs/security.md "Aggregates scoped per tenant"): the
// pools reserved for other tenants are left out (their names and figures
// are theirs), and so are the run counts and spreads behind duration
// estimates, which other tenants' runs of a type of the same name feed. A
// nil explanation is left alone.
func ScopeExplanation(ex *apiv1.Explanation) {
	if ex == nil {
		return
	}
	ex.Candidates = slices.DeleteFunc(ex.Candidates, func(c apiv1.Candidate) bool {
		return c.Rejected == string(placement.ReasonTenantPool)
	})
	for i := range ex.Candidates {
		ex.Candidates[i].Observations, ex.Candidates[i].SpreadSeconds = 0, 0
	}
	if ex.Chosen != nil {
		ex.Chosen.Observations, ex.Chosen.SpreadSeconds = 0, 0
	}
}

// ScopeTo narrows what e tells a principal of one tenant (tenant != ""):
// its explanation, as ScopeExplanation, also one a peer answered.
func (e *Error) ScopeTo(tenant string) {
	if tenant == "" {
		return
	}
	if e.Expl != nil {
		ex := *e.Expl
		ex.Candidates = slices.Clone(ex.Candidates)
		ScopeExplanation(&ex)
		e.Expl = &ex
	}
	if e.peer != nil && e.peer.Explanation != nil {
		pb := *e.peer
		ex := *pb.Explanation
		ex.Candidates = slices.Clone(ex.Candidates)
		ScopeExplanation(&ex)
		pb.Explanation = &ex
		e.peer = &pb
	}
}
