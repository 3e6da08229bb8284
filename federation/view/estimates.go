package view

import (
	"time"

	"github.com/ax-sched/ax/placement"
)

// Learn makes the view set every region's published run times into est,
// the estimator this server's placer reads: every server of every region
// then places with the same learnt durations, a publication (a couple of
// seconds) after the completions that taught them. Run times are each
// tenant's own (region.RunTime): a tenant's tasks are placed by them only.
func (v *View) Learn(est *placement.Estimator) {
	v.est.Store(est)
	v.Refresh()
}

// teach sets the run times of each region's figures into est, once per
// publication (the figures' UpdatedAt).
func (v *View) teach(est *placement.Estimator, infos []RegionInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.taught == nil {
		v.taught = map[string]time.Time{}
	}
	for _, r := range infos {
		if !r.UpdatedAt.After(v.taught[r.Region]) {
			continue
		}
		v.taught[r.Region] = r.UpdatedAt
		for _, p := range r.Pools {
			key := placement.Pool{Region: r.Region, Name: p.Name}.Key()
			for _, rt := range p.RunTimes {
				est.Set(rt.Tenant, rt.Type, key, placement.Estimate{Mean: seconds(rt.Seconds), Spread: seconds(rt.Spread), Count: rt.Count})
			}
		}
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// PriceOverride is the price per slot-hour an operator set for a pool in
// the global etcd (/ax/prices/<region>/<pool>), if any.
func (v *View) PriceOverride(region, pool string) (float64, bool) {
	p, ok := v.Current().prices[region+"/"+pool]
	return p, ok
}
