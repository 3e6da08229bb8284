package submit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
)

// maxSpillRounds bounds the store calls one request makes while its tasks
// spill from pool to pool.
const maxSpillRounds = 8

// item is one submitted spec on its way through the submit pipeline: each
// step reads and writes its own item only, and an item whose answer is
// decided (an error, or forwarded to its key's home) skips the steps left.
type item struct {
	spec     *task.Spec
	out      Outcome
	home     string             // another region, the key's home: forwarded there
	nt       queue.NewTask      // what the store step stores
	decision placement.Decision // placement's first decision (traced)
	ticket   string             // its placement's reservation in flights
	refused  map[string]bool    // the local pools whose store refused it as full
}

// decided reports whether the item's answer needs no more local steps.
func (it *item) decided() bool { return it.out.Err != nil || it.home != "" }

// submitPass is one call of Submit: the clock reading and view snapshot
// every item is placed with.
type submitPass struct {
	n         *Pipeline
	now       time.Time
	vs        *view.Snap
	forwarded bool
	quota     Quota
	take      queue.Quota // what the store step's first call takes of quota
}

// Submit validates, routes and places specs (already decoded; tenant set).
// forwarded is true for a submit another server routed here (never routed
// again). The steps run in order over every item: validate, budget, key
// home, backlog, place; then the items placed here are stored (spilling
// from a full pool to the next candidate) and the keyed ones forwarded.
func (n *Pipeline) Submit(ctx context.Context, specs []*task.Spec, forwarded bool) []Outcome {
	out, _ := n.submit(ctx, Quota{}, 0, specs, forwarded)
	return out
}

// submit is Submit whose store step takes count submits of quota first
// (SubmitWithin): refused there, it returns the request's error and has
// stored and forwarded nothing.
func (n *Pipeline) submit(ctx context.Context, quota Quota, count int, specs []*task.Spec, forwarded bool) ([]Outcome, error) {
	p := &submitPass{n: n, now: n.cfg.Now(), vs: n.cfg.View.Current(), forwarded: forwarded, quota: quota, take: quota.store(count)}
	items := make([]item, len(specs))
	for i, sp := range specs {
		items[i].spec = sp
	}
	for _, step := range []func(*item){p.validate, p.budget, p.keyHome, p.backlog, p.place, p.hold} {
		for i := range items {
			if !items[i].decided() {
				step(&items[i])
			}
		}
	}
	if err := p.store(ctx, items); err != nil {
		return nil, err
	}
	p.forward(ctx, items)
	out := make([]Outcome, len(items))
	for i := range items {
		out[i] = items[i].out
	}
	return out, nil
}

// validate normalizes the spec and refuses regions outside the federation.
func (p *submitPass) validate(it *item) {
	if err := it.spec.Normalize(p.n.cfg.Defaults, p.now); err != nil {
		it.out.Err = err
		return
	}
	it.out.Err = p.n.cfg.Peer.KnownRegions(it.spec.Regions)
}

// budget refuses the spec, or caps its price, when its tenant is past its
// monthly budget.
func (p *submitPass) budget(it *item) { it.out.Err = p.n.cfg.Budgets.Apply(it.spec) }

// keyHome routes a keyed spec to its key's home region when that is
// another one (a forwarded submit is never routed again).
func (p *submitPass) keyHome(it *item) {
	key, _ := it.spec.Key()
	if key == "" || p.forwarded {
		return
	}
	if home := p.n.KeyHome(it.spec.Tenant, key); home != p.n.cfg.Region {
		it.home = home
	}
}

// backlog refuses the spec when every region it may run in refused its
// tenant's hand-offs for their max_backlog a moment ago; else it sets the
// tenant's max_backlog here, which the store checks atomically.
func (p *submitPass) backlog(it *item) {
	n := p.n
	if _, ok := n.cfg.Picker.Regions(it.spec.Regions, it.spec.Tenant, p.now); !ok {
		it.out.Err = &QuotaError{Field: "max_backlog", Tenant: it.spec.Tenant, Regions: it.spec.Regions}
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return
	}
	it.nt = queue.NewTask{Spec: it.spec, BacklogMax: n.backlogMax(it.spec), BacklogBytesMax: n.backlogBytesMax(it.spec)}
}

// place decides the item's pool: a local pool (with its admission limit),
// a hand-off to another region's, or none yet (NO_CAPACITY, or run_at
// later: the leader places it when due, never dropped). A spec no pool can
// ever take, or whose every candidate is saturated, is refused.
func (p *submitPass) place(it *item) {
	n, sp, snap := p.n, it.spec, p.vs.Pools
	it.out.Region = n.cfg.Region
	if sp.RunAt != nil || sp.DebounceKey != "" {
		// Placed when due: a debounced task's start is the store's to set.
		return
	}
	d := n.cfg.Picker.Place(snap, sp, p.now)
	it.decision = d
	n.cfg.Metrics.Decision(n.cfg.Region, d)
	switch {
	case d.OK && d.Region == n.cfg.Region:
		it.nt.Pool, it.nt.AdmitMax = d.Pool, n.cfg.Picker.AdmitMax(d.Pool, sp.Critical)
		it.ticket = p.reserve(d.Region, d.Pool)
	case d.AllSaturated() && !sp.Critical && n.cfg.Picker.SpillLocal(snap, sp, p.now, nil, &it.nt):
		// Damping counted this server's share of every pool's headroom as
		// used; it only spreads choices. The store decides, atomically,
		// whether the pool takes the task.
		it.ticket = p.reserve(n.cfg.Region, it.nt.Pool)
	case d.OK:
		it.nt.Pool, it.nt.HandOff = d.Pool, d.Region
		it.out.Region = d.Region
		it.ticket = p.reserve(d.Region, d.Pool)
	case d.Unplaceable():
		if name, ok := n.cfg.Picker.Unregistered(sp.Regions); ok {
			// A region the task may go to is missing from the view, not
			// known to lack a pool: the registration of a live region
			// lapses in a flap of the global etcd. Retry, not refused.
			it.out.Err = fmt.Errorf("%w: %s: its registration is not in this server's view of the global etcd (yet); retry", peer.ErrRegionUnavailable, name)
			n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "unregistered").Inc()
			return
		}
		it.out.Err = &PlacementError{Explanation: n.cfg.Picker.Explain(snap, sp, p.now)}
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "unplaceable").Inc()
	case d.AllSaturated() && !sp.Critical:
		p.saturated(it)
	}
}

// hold sets the reservation a task of a tenant with a refuse budget makes
// on its budget ledger, checked by the store atomically (submit.ErrBudget):
// its expected cost where it was placed, or for a task placed later (run_at,
// debounce) where it would be placed now.
func (p *submitPass) hold(it *item) {
	if p.n.cfg.Budgets.Hold(it.spec.Tenant, 0) == "" {
		return
	}
	usd := it.decision.Expected
	if !it.decision.OK {
		usd = p.n.cfg.Picker.Explain(p.vs.Pools, it.spec, p.now).Decision.Expected
	}
	it.nt.Budget = p.n.cfg.Budgets.Hold(it.spec.Tenant, usd)
}

// reserve counts a placement into region/pool in flight until it lands.
func (p *submitPass) reserve(region, pool string) string {
	return p.n.cfg.Flights.Reserve(region, pool, p.vs.Updated[region], p.now)
}

// saturated refuses the item: every candidate is saturated (429).
func (p *submitPass) saturated(it *item) {
	pe := &PlacementError{Saturated: true, RetryAfter: p.n.cfg.SaturatedRetryAfter, Explanation: p.n.cfg.Picker.Explain(p.vs.Pools, it.spec, p.now)}
	it.out.Err = pe
	p.n.cfg.Metrics.Saturated(p.n.cfg.Region, pe.Explanation, it.refused)
}

// store stores the items placed here in one store call per round; the
// ones a full pool refused spill to the next candidate and go in the next
// round (at most maxSpillRounds to local pools). The first call takes the
// request's quota (p.take) with its tasks, alone when there are none; the
// quota refused, store returns the request's error and nothing is stored.
func (p *submitPass) store(ctx context.Context, items []item) error {
	var batch []*item
	for i := range items {
		if !items[i].decided() {
			batch = append(batch, &items[i])
		}
	}
	if len(batch) == 0 && p.take.N > 0 {
		_, err := p.n.cfg.Store.SubmitWithin(ctx, p.take)
		return p.refused(err, nil)
	}
	for round := 0; len(batch) > 0; round++ {
		nts := make([]queue.NewTask, len(batch))
		for k, it := range batch {
			nts[k] = it.nt
		}
		// A local flight lands when its submit began, not when it returned:
		// figures whose counts were read while the call ran (stamped before
		// that read, region.Cell.collect) may hold it, and counting it in
		// flight too would make the pool look a batch fuller than it is. A
		// flight forgotten early costs nothing wrong: the store's admission
		// (AdmitMax) is authoritative, and a task it refuses spills.
		began := p.n.cfg.Now()
		var res []queue.SubmitResult
		var err error
		if round == 0 && p.take.N > 0 {
			res, err = p.n.cfg.Store.SubmitWithin(ctx, p.take, nts...)
			if err := p.refused(err, batch); err != nil {
				return err
			}
		} else {
			res, err = p.n.cfg.Store.Submit(ctx, nts...)
		}
		stored := p.n.cfg.Now()
		var again []*item
		for k, it := range batch {
			switch {
			case err != nil:
				it.out.Err = err
				p.n.cfg.Flights.Drop(it.ticket)
			case errors.Is(res[k].Err, queue.ErrPoolFull):
				if p.spill(it, round) {
					again = append(again, it)
				}
			case p.released(ctx, it, res[k]):
				again = append(again, it)
			default:
				p.stored(ctx, it, res[k], began, stored)
			}
		}
		p.n.wake()
		batch = again
	}
	return nil
}

// refused is the request's error when err is the store's refusal of its
// quota (the batch's flights are dropped: nothing was stored), else nil.
func (p *submitPass) refused(err error, batch []*item) error {
	var qe *queue.QuotaError
	if !errors.As(err, &qe) {
		return nil
	}
	for _, it := range batch {
		p.n.cfg.Flights.Drop(it.ticket)
	}
	return p.quota.refused(qe)
}

// spill moves an item its local pool refused as full (the pool's admission
// limit, authoritative in this region's Redis) to the next candidate: a
// local pool, else another region's; false when none is left (429).
func (p *submitPass) spill(it *item, round int) bool {
	n := p.n
	n.cfg.Flights.Drop(it.ticket)
	if it.refused == nil {
		it.refused = map[string]bool{}
	}
	it.refused[it.nt.Pool] = true
	nt := queue.NewTask{Spec: it.spec, BacklogMax: it.nt.BacklogMax, BacklogBytesMax: it.nt.BacklogBytesMax,
		Budget: it.nt.Budget}
	switch {
	case round < maxSpillRounds && n.cfg.Picker.SpillLocal(p.vs.Pools, it.spec, p.now, it.refused, &nt):
		it.out.Region = n.cfg.Region
	case n.cfg.Picker.SpillRemote(p.vs.Pools, it.spec, p.now, &nt):
		it.out.Region = nt.HandOff
	default:
		p.saturated(it)
		return false
	}
	it.nt = nt
	it.ticket = p.reserve(cmp.Or(nt.HandOff, n.cfg.Region), nt.Pool)
	return true
}

// stored records the store's answer for an item: its flight lands (or is
// dropped), a full backlog is a *QuotaError, and a duplicate answers where
// the first task is.
func (p *submitPass) stored(ctx context.Context, it *item, r queue.SubmitResult, began, stored time.Time) {
	n := p.n
	if it.ticket != "" {
		if r.Err == nil && !r.Duplicate {
			n.cfg.Flights.Bind(it.ticket, r.ID)
			switch {
			case it.nt.HandOff == "":
				n.cfg.Flights.Landed(r.ID, began)
			case !n.sends():
				// The leader sends it: it counts until it leaves the
				// outbox (Node's watch of awaited flights).
				n.cfg.Flights.Await(r.ID)
			}
		} else {
			n.cfg.Flights.Drop(it.ticket)
		}
	}
	switch {
	case errors.Is(r.Err, queue.ErrBacklogFull):
		r.Err = &QuotaError{Field: "max_backlog", Tenant: it.spec.Tenant, Max: it.nt.BacklogMax}
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
	case errors.Is(r.Err, queue.ErrBacklogBytesFull):
		r.Err = &QuotaError{Field: "max_backlog_bytes", Tenant: it.spec.Tenant, Max: int(it.nt.BacklogBytesMax)}
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
	case errors.Is(r.Err, submit.ErrBudget):
		r.Err = n.cfg.Budgets.Refused(it.spec.Tenant)
	}
	it.out.ID, it.out.State, it.out.Duplicate, it.out.Err = r.ID, r.State, r.Duplicate, r.Err
	switch {
	case r.Duplicate && it.spec.UniqueConflict == task.UniqueConflictReject:
		it.out = Outcome{ID: r.ID, Err: &task.UniqueConflictError{ID: r.ID}}
	case r.Duplicate:
		p.duplicate(ctx, it)
	case r.Err == nil:
		it.out.Pool = it.nt.Pool
		n.cfg.Metrics.Submit(n.cfg.Region, it.spec.Tenant, it.spec.Type)
		n.traceSubmit(ctx, p.now, stored, r.ID, it.spec, it.nt, it.decision)
	}
}

// duplicate answers a repeated submit with the first task's whereabouts,
// not where this spec would be placed now.
func (p *submitPass) duplicate(ctx context.Context, it *item) {
	it.out.Region = p.n.cfg.Region
	t, err := p.n.cfg.Store.Get(ctx, it.out.ID)
	if err != nil {
		return
	}
	it.out.Pool, it.out.State = t.Pool, t.State
	switch {
	case t.HandOffTarget != "":
		it.out.Region = t.HandOffTarget
	case t.HandedOffTo != "":
		it.out.Region = t.HandedOffTo
	}
}

// forward sends the keyed items to their keys' home regions, one batch per
// region.
func (p *submitPass) forward(ctx context.Context, items []item) {
	byHome := map[string][]*item{}
	var homes []string
	for i := range items {
		if h := items[i].home; h != "" {
			if _, ok := byHome[h]; !ok {
				homes = append(homes, h)
			}
			byHome[h] = append(byHome[h], &items[i])
		}
	}
	for _, h := range homes {
		p.n.forwardSubmit(ctx, h, byHome[h])
	}
}
