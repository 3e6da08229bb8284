package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// cost is GET /v1/cost: the spend of the attempts every region ran (or
// region=) over from..to, grouped by group_by (docs/cost.md). A tenant's
// token sees its own tenant only.
func (th *taskHandlers) cost(w http.ResponseWriter, r *http.Request, p Principal) error {
	q, err := parseCostQuery(r.URL.RawQuery, p, time.Now())
	if err != nil {
		return err
	}
	rep, err := th.lists.Cost(r.Context(), q, endpoint.Hops(r))
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.CostReport{From: q.From.Format(time.DateOnly), To: q.To.Format(time.DateOnly),
		GroupBy: q.GroupBy, Rows: rep.Rows, Total: rep.Total, Regions: endpoint.Outcomes(rep.Regions), Unavailable: rep.Unavailable,
		Budgets: th.lists.Budgets(q.Tenant)})
	return nil
}

// parseCostQuery reads GET /v1/cost's parameters: from and to are UTC days
// (YYYY-MM-DD, inclusive; default this month so far), group_by a comma
// list of apiv1.CostGroups (default tenant,pool). A scoped principal reads
// its own tenant's (tenant= naming another is 403); an unknown parameter
// is refused.
func parseCostQuery(raw string, p Principal, now time.Time) (fanout.CostQuery, error) {
	today := federation.CostDay(now)
	q := fanout.CostQuery{From: time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC), To: today,
		GroupBy: []string{apiv1.CostGroupTenant, apiv1.CostGroupPool}}
	v, err := endpoint.ParseQuery(raw, "from", "to", "group_by", "tenant", "region")
	if err != nil {
		return q, err
	}
	for _, d := range []struct {
		name string
		into *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := v.Get(d.name); s != "" {
			t, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return q, &task.FieldError{Field: d.name, Msg: "must be a UTC day, YYYY-MM-DD"}
			}
			*d.into = t
		}
	}
	if q.To.Before(q.From) {
		return q, &task.FieldError{Field: "to", Msg: "must not be before from"}
	}
	if days := int(q.To.Sub(q.From)/(24*time.Hour)) + 1; days > federation.MaxCostDays {
		return q, &task.FieldError{Field: "to", Msg: fmt.Sprintf("a report spans at most %d days (records are kept that long)", federation.MaxCostDays)}
	}
	if s, ok := v["group_by"]; ok {
		var by []string
		for _, g := range strings.Split(strings.Join(s, ","), ",") {
			g = strings.TrimSpace(g)
			if g == "" {
				continue
			}
			if !slices.Contains(apiv1.CostGroups, g) {
				return q, &task.FieldError{Field: "group_by", Msg: fmt.Sprintf("unknown dimension %q (%s)", g, strings.Join(apiv1.CostGroups, ", "))}
			}
			by = append(by, g)
		}
		// Canonical order, each once: rows sort and print in it.
		q.GroupBy = []string{}
		for _, g := range apiv1.CostGroups {
			if slices.Contains(by, g) {
				q.GroupBy = append(q.GroupBy, g)
			}
		}
	}
	q.Region = v.Get("region")
	q.Tenant, err = p.Scope(v.Get("tenant"), "read the cost of")
	return q, err
}
