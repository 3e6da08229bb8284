package fanout

// Cost reports (GET /v1/cost): each region reads the cost records of the
// attempts it ran (read.Tasks.Costs), prices their reference and groups
// them; the server asked merges every region's rows like a fan-out of
// dead letters (fanout.go): a region that does not answer is named, never
// dropped silently. docs/cost.md says how each figure is computed.

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/view"
)

// CostQuery is a cost report's range, grouping and filters, checked by the
// API.
type CostQuery struct {
	From, To time.Time // UTC days, inclusive
	GroupBy  []string  // of apiv1.CostGroups, in that order
	Tenant   string    // only this tenant ("" every tenant)
	Region   string    // only the attempts this region ran ("" every region)
}

// CostReport is a merged cost report and each region's part.
type CostReport struct {
	Rows        []apiv1.CostRow // sorted by the grouped dimensions
	Total       apiv1.CostRow
	Regions     []RegionPart // Count: the region's runs
	Unavailable []string
}

// Cost reports the spend of the attempts every region (or q.Region) ran
// in q's days, grouped by q.GroupBy. hops is how many servers the request
// being served has passed.
func (rd *Reader) Cost(ctx context.Context, q CostQuery, hops int) (*CostReport, error) {
	regions, err := rd.fanOutRegions(q.Region, hops)
	if err != nil {
		return nil, err
	}
	v := url.Values{"from": {q.From.Format(time.DateOnly)}, "to": {q.To.Format(time.DateOnly)},
		"group_by": {strings.Join(q.GroupBy, ",")}}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	parts := fanOut(ctx, rd, regions,
		func(ctx context.Context) ([]apiv1.CostRow, error) { return rd.localCost(ctx, q) },
		func(ctx context.Context, api string) ([]apiv1.CostRow, error) {
			var out apiv1.CostReport
			_, err := rd.cfg.Peer.Call(ctx, api, http.MethodGet, "/v1/cost?"+v.Encode(), nil, &out)
			return out.Rows, err
		})
	outs, unavailable, err := gather(rd, "cost", parts, func(rs []apiv1.CostRow) int {
		k := int64(0)
		for _, r := range rs {
			k += r.Runs
		}
		return int(k)
	})
	if err != nil {
		return nil, err
	}
	groups := map[apiv1.CostRow]*apiv1.CostRow{}
	rep := &CostReport{Regions: outs, Unavailable: unavailable, Rows: []apiv1.CostRow{}}
	for _, p := range parts {
		for _, r := range p.val {
			if q.Tenant != "" && r.Tenant != "" && r.Tenant != q.Tenant {
				continue // a peer that ignored the filter leaks nothing
			}
			if slices.Contains(q.GroupBy, apiv1.CostGroupRegion) {
				r.Region = p.region
			}
			addCost(groups, keyOf(r, q.GroupBy), r)
			addCost(nil, apiv1.CostRow{}, r, &rep.Total)
		}
	}
	for _, g := range groups {
		roundPico(g)
		rep.Rows = append(rep.Rows, *g)
	}
	roundPico(&rep.Total)
	sortCostRows(rep.Rows)
	return rep, nil
}

// localCost is this region's part of a report: its cost records in q's
// days, each priced against its reference, grouped by q.GroupBy.
func (rd *Reader) localCost(ctx context.Context, q CostQuery) ([]apiv1.CostRow, error) {
	recs, err := rd.cfg.Store.Costs(ctx, q.From, q.To)
	if err != nil {
		return nil, err
	}
	pools := rd.cfg.View.Regions()
	groups := map[apiv1.CostRow]*apiv1.CostRow{}
	for _, rec := range recs {
		if q.Tenant != "" && rec.Tenant != q.Tenant {
			continue
		}
		r := apiv1.CostRow{Tenant: rec.Tenant, Type: rec.Type, Pool: rec.Pool, Region: rd.cfg.Region,
			Day: rec.Day.Format(time.DateOnly), Runs: rec.Runs, FailedRuns: rec.Failed,
			RunSeconds: rec.RunTime.Seconds(), SpendUSD: float64(rec.PicoUSD) / 1e12}
		if ref, ok := referencePrice(pools, rec.Tags); ok {
			// In whole pico-dollars as the spend is; a difference within
			// the records' rounding (a pico-dollar per run) is no saving
			// (it printed as savings of $0.00000000000133333).
			refPico := int64(math.Round(ref * rec.RunTime.Hours() * 1e12))
			if d := refPico - rec.PicoUSD; d >= -rec.Runs && d <= rec.Runs {
				refPico = rec.PicoUSD
			}
			r.ReferenceUSD = float64(refPico) / 1e12
		} else {
			r.ReferenceUSD, r.UnreferencedRuns = r.SpendUSD, rec.Runs
		}
		r.SavingsUSD = r.ReferenceUSD - r.SpendUSD
		if spotPool(pools, rd.cfg.Region, rec.Pool) {
			r.SpotRuns, r.SpotSeconds = rec.Runs, r.RunSeconds
		}
		addCost(groups, keyOf(r, q.GroupBy), r)
	}
	out := make([]apiv1.CostRow, 0, len(groups))
	for _, g := range groups {
		roundPico(g)
		out = append(out, *g)
	}
	sortCostRows(out)
	return out, nil
}

// roundPico rounds r's dollar figures to whole pico-dollars, the records'
// unit: sums and differences of float64s otherwise answer savings of
// $0.00014594813299999998 for $0.000145948133.
func roundPico(r *apiv1.CostRow) {
	for _, v := range []*float64{&r.SpendUSD, &r.ReferenceUSD, &r.SavingsUSD} {
		*v = math.Round(*v*1e12) / 1e12
	}
}

// referencePrice is the lowest effective price per slot-hour (price ×
// (1 − discount)) of an on-demand pool, in any region of the view, that
// carries every tag in tags; false when none does.
func referencePrice(regions []view.RegionInfo, tags map[string]string) (float64, bool) {
	best, found := 0.0, false
	for _, r := range regions {
		for _, p := range r.Pools {
			if p.Spot || !carries(p.Tags, tags) {
				continue
			}
			if price := p.PricePerSlotHour * (1 - p.Discount); !found || price < best {
				best, found = price, true
			}
		}
	}
	return best, found
}

func carries(have, need map[string]string) bool {
	for k, v := range need {
		if have[k] != v {
			return false
		}
	}
	return true
}

// spotPool reports whether the view marks pool of region spot.
func spotPool(regions []view.RegionInfo, region, pool string) bool {
	for _, r := range regions {
		if r.Region != region {
			continue
		}
		for _, p := range r.Pools {
			if p.Name == pool {
				return p.Spot
			}
		}
	}
	return false
}

// keyOf is r's dimensions that by groups by, the others blank.
func keyOf(r apiv1.CostRow, by []string) apiv1.CostRow {
	var k apiv1.CostRow
	for _, g := range by {
		switch g {
		case apiv1.CostGroupTenant:
			k.Tenant = r.Tenant
		case apiv1.CostGroupType:
			k.Type = r.Type
		case apiv1.CostGroupPool:
			k.Pool = r.Pool
		case apiv1.CostGroupRegion:
			k.Region = r.Region
		case apiv1.CostGroupDay:
			k.Day = r.Day
		}
	}
	return k
}

// addCost adds r's figures to the group of key in groups (created from
// key when new), or to into when given.
func addCost(groups map[apiv1.CostRow]*apiv1.CostRow, key, r apiv1.CostRow, into ...*apiv1.CostRow) {
	var g *apiv1.CostRow
	if len(into) > 0 {
		g = into[0]
	} else if g = groups[key]; g == nil {
		g = &key
		groups[key] = g
	}
	g.Runs += r.Runs
	g.FailedRuns += r.FailedRuns
	g.RunSeconds += r.RunSeconds
	g.SpendUSD += r.SpendUSD
	g.ReferenceUSD += r.ReferenceUSD
	g.SavingsUSD += r.SavingsUSD
	g.SpotRuns += r.SpotRuns
	g.SpotSeconds += r.SpotSeconds
	g.UnreferencedRuns += r.UnreferencedRuns
}

func sortCostRows(rs []apiv1.CostRow) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		for _, p := range [][2]string{{a.Tenant, b.Tenant}, {a.Type, b.Type}, {a.Pool, b.Pool}, {a.Region, b.Region}, {a.Day, b.Day}} {
			if p[0] != p[1] {
				return p[0] < p[1]
			}
		}
		return false
	})
}
