package endpoint

import (
	"slices"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/placement"
)

// ScopeExplanation narrows a placement explanation to what a token of one
// tenant may learn (docs/security.md "Aggregates scoped per tenant"): the
// pools reserved for other tenants are left out (their names and figures
// are theirs). Duration estimates, their run counts and spreads stay: they
// are learnt from the explained task's tenant's own runs only. A nil
// explanation is left alone.
func ScopeExplanation(ex *apiv1.Explanation) {
	if ex == nil {
		return
	}
	ex.Candidates = slices.DeleteFunc(ex.Candidates, func(c apiv1.Candidate) bool {
		return c.Rejected == string(placement.ReasonTenantPool)
	})
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
