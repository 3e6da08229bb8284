package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// TestTenantRunsDoNotMoveAnotherTenantsPlacement: run times are learnt per
// tenant (docs/security.md "Aggregates scoped per tenant"). Two regions of
// two servers, auth on: us-east-1's pool costs half as much per slot-hour
// but runs the work 8x slower. team-a's runs teach every server that, so
// team-a's tasks go to eu-west-1 whichever server takes them; team-b, which
// ran nothing, is still placed by the default duration on the cheap pool,
// its explain shows no learnt estimate, and its tasks submitted in
// eu-west-1 are handed to us-east-1 and succeed there. Before run times
// were learnt per tenant team-a's runs moved team-b's tasks too.
func TestTenantRunsDoNotMoveAnotherTenantsPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation")
	}
	slow, fast := "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2,
		pools: map[string]string{
			slow: "- {name: cpu, tags: {class: cpu}, slots: 20, price_per_slot_hour: 0.02}",
			fast: "- {name: cpu, tags: {class: cpu}, slots: 20, price_per_slot_hour: 0.04}",
		},
		regionWorker: map[string]string{
			slow: `exec: {allow: {work: {argv: [/bin/sleep, "0.8"]}}}`,
			fast: `exec: {allow: {work: {argv: [/bin/sleep, "0.1"]}}}`,
		}})
	spec := func(regions ...string) map[string]any {
		s := map[string]any{"type": "exec", "tags": map[string]string{"class": "cpu"},
			"payload": map[string]any{"command": "work"}}
		if len(regions) > 0 {
			s["regions"] = regions
		}
		return s
	}
	var servers []*proc
	for _, r := range fed.order {
		servers = append(servers, fed.region(r).servers...)
	}
	explain := func(s *proc, tok string) apiv1.Explanation {
		t.Helper()
		code, body := fed.callAPI(s.api, tok, http.MethodPost, "/v1/placement/explain", spec())
		var ex apiv1.Explanation
		if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
			t.Fatalf("explain on %s: %d %s", s.name, code, body)
		}
		return ex
	}
	// placedBy: where the explanation puts the task, and whether every
	// candidate's estimate is learnt (all true) or the default (all false).
	placedBy := func(ex apiv1.Explanation) (region string, learnt, unlearnt bool) {
		learnt, unlearnt = true, true
		for _, c := range ex.Candidates {
			learnt = learnt && c.EstimateSource == "learnt" && c.Observations > 0
			unlearnt = unlearnt && c.EstimateSource == "default" && c.Observations == 0
		}
		if ex.Chosen != nil {
			region = ex.Chosen.Region
		}
		return region, learnt, unlearnt
	}

	// team-a runs the work in both regions (pinned), 6 tasks each.
	var ids []string
	for range 6 {
		for _, r := range fed.order {
			id, _ := fed.submit(r, tokSubmitterA, spec(r))
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		fed.waitState(slow, tokSubmitterA, id, task.Success, time.Minute)
	}
	waitUntil(t, time.Minute, "every server places team-a's tasks in "+fast+" by learnt estimates", func() bool {
		for _, s := range servers {
			if r, learnt, _ := placedBy(explain(s, tokSubmitterA)); r != fast || !learnt {
				return false
			}
		}
		return true
	})

	// team-b ran nothing: every server places it by the default, on the
	// cheap pool, and shows it none of team-a's figures.
	for _, s := range servers {
		ex := explain(s, tokSubmitterB)
		if r, _, unlearnt := placedBy(ex); r != slow || !unlearnt {
			t.Fatalf("team-b's explain on %s after team-a's runs: chosen %+v, candidates %+v", s.name, ex.Chosen, ex.Candidates)
		}
	}
	// And its tasks go there, from every server: those submitted in
	// eu-west-1 are handed to us-east-1. team-a's go to eu-west-1.
	for _, s := range servers {
		for _, c := range []struct{ tok, want string }{{tokSubmitterB, slow}, {tokSubmitterA, fast}} {
			code, body := fed.callAPI(s.api, c.tok, http.MethodPost, "/v1/tasks", spec())
			var r struct {
				ID     string `json:"id"`
				Region string `json:"region"`
			}
			if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.Region != c.want {
				t.Fatalf("%s's task submitted to %s: %d %s, want it placed in %s", tenantOf[c.tok], s.name, code, body, c.want)
			}
			fed.waitState(fast, c.tok, r.ID, task.Success, time.Minute)
		}
	}
}
