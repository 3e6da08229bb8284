package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// describe sets each candidate's Detail: the figure behind its reason code, so an operator
// reads "0.96 fill ≥ 0.95 hard watermark" rather than a bare SATURATED. Explain only: Place
// never formats.
func (p *Placer) describe(s *Snapshot, t *Task, now time.Time, exp *Explanation) {
	if s == nil {
		return
	}
	for i := range s.pools {
		e := &s.pools[i]
		if e.input >= len(exp.Candidates) {
			continue
		}
		c := &exp.Candidates[e.input]
		c.Detail = p.detail(e.pool, c, t, now)
	}
}

func (p *Placer) detail(pl *Pool, c *Candidate, t *Task, now time.Time) string {
	switch c.Reason {
	case ReasonTagMismatch:
		keys := make([]string, 0, len(t.Tags))
		for k := range t.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if have, ok := pl.Tags[k]; !ok {
				return fmt.Sprintf("needs %s=%s; the pool has no %s", k, t.Tags[k], k)
			} else if have != t.Tags[k] {
				return fmt.Sprintf("needs %s=%s; the pool has %s=%s", k, t.Tags[k], k, have)
			}
		}
		return "needs tags the pool does not carry"
	case ReasonRegionExcluded:
		return "the task allows only " + strings.Join(t.Regions, ", ")
	case ReasonUnhealthy:
		return "its region is not registered, its leader is gone, or it did not answer moments ago"
	case ReasonStaleStatus:
		return fmt.Sprintf("figures %.1fs old > stale_after %s", now.Sub(pl.UpdatedAt).Seconds(), p.cfg.StaleAfter)
	case ReasonNoCapacityWindow:
		return "its capacity window gives it 0 slots now"
	case ReasonNoSlots:
		return "0 live slots (no live worker)"
	case ReasonNoHandler:
		types := pl.Types
		more := ""
		if len(types) > 8 {
			types, more = types[:8], fmt.Sprintf(" and %d more", len(pl.Types)-8)
		}
		return fmt.Sprintf("its live workers serve %s%s, not %s", strings.Join(types, ", "), more, t.Type)
	case ReasonSaturated:
		if pl.Paused && lowHeld(t) {
			return fmt.Sprintf("paused for priorities 3-4 (priority %d) until its fill falls under the resume threshold", t.Priority)
		}
		return fmt.Sprintf("%.2f fill ≥ %.2f hard watermark (%d ready of capacity %d, %d running of %d slots, with this server's share of the headroom)",
			c.Fill, p.cfg.HardWatermark, pl.Ready, pl.QueueCapacity, pl.Running, pl.Slots)
	case "":
		var parts []string
		if c.Penalty > 1 {
			parts = append(parts, fmt.Sprintf("%.2f fill ≥ %.2f hard watermark (critical): cost ×%.3g", c.Fill, p.cfg.HardWatermark, c.Penalty))
		}
		if w := waitDetail(c); w != "" {
			parts = append(parts, w)
		}
		return strings.Join(parts, "; ")
	}
	return ""
}

// waitDetail says how an eligible pool's expected wait was reached and how it compares with its
// target; "" when a slot is free and no target applies.
func waitDetail(c *Candidate) string {
	var w string
	switch c.WaitSource {
	case WaitFreeSlot:
		w = "a slot is free: expected wait 0s"
	case WaitMeasured:
		w = fmt.Sprintf("expected wait %.1fs (%d ahead + this one ÷ %.3g/s measured drain)", c.Wait.Seconds(), c.Ahead, c.DrainRate)
	case WaitSlots:
		w = fmt.Sprintf("expected wait %.1fs (%d ahead + this one ÷ %.3g/s from slots ÷ expected duration)", c.Wait.Seconds(), c.Ahead, c.DrainRate)
	}
	switch {
	case c.WaitTarget <= 0:
		if c.WaitSource == WaitFreeSlot {
			return ""
		}
		return w
	case c.OverTarget:
		return fmt.Sprintf("%s > max_wait %s", w, c.WaitTarget)
	}
	return fmt.Sprintf("%s ≤ max_wait %s", w, c.WaitTarget)
}

// ReasonOverPriceCap: the pool's effective price per slot-hour is above the task's
// max_price_per_slot_hour (Explanation.CapPrice).
const ReasonOverPriceCap Reason = "OVER_PRICE_CAP"

// CapPrice applies a task's price cap (USD per slot-hour; ≤ 0: none) to an explanation: every
// pool that passed the tag and region filters and is priced above max is rejected with
// OVER_PRICE_CAP. A winner above the cap gives way to the cheapest eligible pool under it; with
// no pool under the cap that matches, the decision is unplaceable (422), and with every one of
// them saturated, saturated. The scores are not changed.
func (e *Explanation) CapPrice(max float64) {
	if max <= 0 {
		return
	}
	best, winnerOver := -1, false
	matching, saturated := 0, 0
	for i := range e.Candidates {
		c := &e.Candidates[i]
		if c.Reason == ReasonTagMismatch || c.Reason == ReasonRegionExcluded {
			continue
		}
		if c.Price > max {
			winnerOver = winnerOver || c.Won
			c.Reason, c.Won = ReasonOverPriceCap, false
			c.Detail = fmt.Sprintf("$%s/h > max_price_per_slot_hour $%s/h", strconv.FormatFloat(c.Price, 'f', -1, 64),
				strconv.FormatFloat(max, 'f', -1, 64))
			continue
		}
		matching++
		if c.Reason == ReasonSaturated {
			saturated++
		}
		if c.Reason == "" && (best < 0 || c.Cost < e.Candidates[best].Cost) {
			best = i
		}
	}
	if !winnerOver && e.Decision.OK {
		return
	}
	if best >= 0 {
		c := &e.Candidates[best]
		c.Won = true
		e.Decision = Decision{Region: c.Region, Pool: c.Pool, Index: c.Index, Cost: c.Cost, Expected: c.BaseCost, OK: true, Wait: c.Wait,
			OverTarget: c.OverTarget, outcome: placed}
		return
	}
	e.Decision = Decision{Index: -1, outcome: classify(len(e.Candidates), matching, saturated)}
}
