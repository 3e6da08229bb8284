package httpapi

import (
	"context"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/history"
	"github.com/prometheus/client_golang/prometheus"
)

// historyLook is one sample of the dashboard's history (httpapi/history):
// every region's queue depth from the global view, n's region's finished
// tasks, this server's accepted submits by tenant (ax_tasks_submitted_total
// of gather) and today's spend by tenant in every region that answers.
func historyLook(n *federation.Node, th *taskHandlers, gather prometheus.Gatherer) func(context.Context) history.Sample {
	return func(ctx context.Context) history.Sample {
		var s history.Sample
		if n == nil {
			return s
		}
		for _, rs := range th.regionsResponse().Regions {
			hr := apiv1.HistoryRegion{Name: rs.Name, Pools: []apiv1.HistoryPool{}}
			for _, p := range rs.Pools {
				hr.Pools = append(hr.Pools, apiv1.HistoryPool{Name: p.Name, QueueFill: p.QueueFill, Utilisation: p.Utilisation, WaitP99Seconds: p.WaitP99Seconds})
				hr.Ready += p.Ready
				hr.Running += p.Running
				hr.Slots += p.Slots
			}
			s.Regions = append(s.Regions, hr)
		}
		if ok, failed, err := n.Finished(ctx); err == nil {
			s.Succeeded, s.Failed, s.Counted = ok, failed, true
		}
		s.Submitted = map[string]float64{}
		if mfs, err := gather.Gather(); err == nil {
			for _, mf := range mfs {
				if mf.GetName() != "ax_tasks_submitted_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "tenant" {
							s.Submitted[l.GetValue()] += m.GetCounter().GetValue()
						}
					}
				}
			}
		}
		today := federation.CostDay(time.Now())
		rep, err := th.lists.Cost(ctx, fanout.CostQuery{From: today, To: today, GroupBy: []string{apiv1.CostGroupTenant}}, 0)
		if err == nil {
			s.Spend = map[string]float64{}
			for _, r := range rep.Rows {
				s.Spend[r.Tenant] += r.SpendUSD
			}
		}
		return s
	}
}
