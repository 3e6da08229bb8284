package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// A refuse budget holds at its edge: concurrent submitters on every server
// of two regions (two servers each, auth on), half their tasks pinned to
// the other region (handed off), go on until the budget refuses them; once
// every accepted task has ended, the tenant's spend is within 10 % of its
// budget and most of it was used. Admission reserves each task's expected
// cost on its region's ledger (its share of the budget, moved between
// the regions through the global etcd), so the spend read every
// budget_refresh (left at its 30 s default here) is not what stops them.
func TestBudgetHoldsAtItsEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a federation of real processes")
	}
	const (
		budgetUSD  = 0.5
		submitters = 3 // per server
		// $120/slot-hour: a task of 300 ms costs $0.01, a 50th of the budget.
		pools = "- {name: cpu, tags: {class: cpu}, slots: 8, price_per_slot_hour: 120}"
	)
	us, eu := "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2, pools: map[string]string{us: pools, eu: pools},
		extra: "tenants: {team-b: {monthly_budget_usd: 0.5, over_budget: refuse}}"})
	type accepted struct{ id, home, region string }
	var (
		mu       sync.Mutex
		ids      []accepted
		refusals int
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, home := range fed.order {
		other := us
		if home == us {
			other = eu
		}
		for si, s := range fed.region(home).servers {
			for k := range submitters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					spec := map[string]any{"type": "sleep", "tags": map[string]string{"class": "cpu"}, "payload": map[string]int{"ms": 300}}
					if (si+k)%2 == 0 {
						spec["regions"] = []string{other}
					}
					last := time.Now()
					for time.Since(last) < 5*time.Second && time.Since(start) < 2*time.Minute {
						code, body := fed.callAPI(s.api, tokSubmitterB, http.MethodPost, "/v1/tasks", spec)
						var r struct {
							ID     string `json:"id"`
							Region string `json:"region"`
						}
						switch {
						case code == http.StatusCreated && json.Unmarshal(body, &r) == nil:
							mu.Lock()
							ids = append(ids, accepted{r.ID, home, r.Region})
							mu.Unlock()
							last = time.Now()
						case code == http.StatusTooManyRequests && strings.Contains(string(body), `"code":"budget_exceeded"`) &&
							strings.Contains(string(body), `"field":"monthly_budget_usd"`):
							mu.Lock()
							refusals++
							mu.Unlock()
							time.Sleep(50 * time.Millisecond)
						case code == http.StatusTooManyRequests:
							time.Sleep(50 * time.Millisecond) // the pools' queues: not the budget
						default:
							t.Errorf("submit to %s: %d %s", s.name, code, body)
							return
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	handed := 0
	for _, a := range ids {
		if a.region != a.home {
			handed++
		}
	}
	t.Logf("%d accepted (%d handed off to the other region), %d refused budget_exceeded in %v", len(ids), handed, refusals,
		time.Since(start).Round(100*time.Millisecond))
	if handed == 0 || refusals == 0 {
		t.Fatalf("%d handed off, %d refused: want some of each", handed, refusals)
	}
	for _, a := range ids {
		fed.waitState(a.home, tokSubmitterB, a.id, task.Success, time.Minute)
	}
	var spent float64
	waitUntil(t, 20*time.Second, "team-b's spend of every region", func() bool {
		code, body := fed.call(us, tokOperator, http.MethodGet, "/v1/cost?group_by=tenant&tenant=team-b", nil)
		var rep apiv1.CostReport
		if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || len(rep.Unavailable) > 0 {
			return false
		}
		spent = rep.Total.SpendUSD
		return spent > 0
	})
	t.Logf("team-b spent $%.4f of its $%g budget (%.1f %%), %d tasks", spent, budgetUSD, 100*spent/budgetUSD, len(ids))
	if spent > 1.10*budgetUSD {
		t.Fatalf("team-b spent $%.4f, %.1f %% past its $%g budget (at most 10 %%)", spent, 100*(spent/budgetUSD-1), budgetUSD)
	}
	if spent < 0.7*budgetUSD {
		t.Fatalf("team-b spent $%.4f of its $%g budget: its submitters were refused long before its edge", spent, budgetUSD)
	}
}
