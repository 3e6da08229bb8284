package pick

// Backlog refusals of hand-offs (docs/security.md "max_backlog"):
// a receiver counts the hand-offs it accepts in the tenant's backlog there
// and refuses, definitely, one that would pass the tenant's max_backlog
// (AcceptMany: the submit script checks it with the count). The sender
// places a refused task again, like any refused hand-off, and for a while
// leaves the refusing region out of the tenant's placements, so the task
// goes to the next candidate or waits at home instead of being handed to
// the same full region again and again.

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/federation/peer"
)

// backlogRefusalFor is how long a region that refused a tenant's hand-off
// for its max_backlog is left out of that tenant's placements.
const backlogRefusalFor = 10 * time.Second

// refusals remembers which regions refused which tenants' hand-offs for
// their backlog, until when.
type refusals struct {
	mu    sync.Mutex
	until map[[2]string]time.Time // {region, tenant}
}

func (r *refusals) note(region, tenant string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = map[[2]string]time.Time{}
	}
	r.until[[2]string{region, tenant}] = now.Add(backlogRefusalFor)
}

// refusing is the regions refusing tenant's hand-offs now (nil: none).
func (r *refusals) refusing(tenant string, now time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, until := range r.until {
		switch {
		case !now.Before(until):
			delete(r.until, k)
		case k[1] == tenant:
			out = append(out, k[0])
		}
	}
	return out
}

// BacklogRefusal reports whether a hand-off's refusal was the receiver's
// max_backlog or max_backlog_bytes.
func BacklogRefusal(err error) bool {
	var pe *peer.Error
	if !errors.As(err, &pe) {
		return false
	}
	for _, f := range []string{"max_backlog", "max_backlog_bytes"} {
		if pe.Body.Field == f || strings.HasSuffix(pe.Body.Field, "."+f) {
			return true
		}
	}
	return false
}

// NoteRefusal leaves region out of tenant's placements for a while: it
// refused a hand-off of tenant's for its max_backlog.
func (p *Picker) NoteRefusal(region, tenant string, now time.Time) {
	p.refusals.note(region, TenantOf(tenant), now)
}

// Regions narrows the regions a task of tenant may be placed in
// (allowed; empty: any) by the regions refusing its hand-offs now. ok is
// false when no region is left: every one it may go to refused it.
func (p *Picker) Regions(allowed []string, tenant string, now time.Time) (regions []string, ok bool) {
	out := p.refusals.refusing(TenantOf(tenant), now)
	if len(out) == 0 {
		return allowed, true
	}
	base := allowed
	if len(base) == 0 {
		base = append([]string{p.cfg.Region}, p.cfg.Regions...)
	}
	for _, r := range base {
		if !slices.Contains(out, r) && !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
	}
	return regions, len(regions) > 0
}

// TenantOf is a tenant's name as specs and records carry it.
func TenantOf(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}
