package dag

import (
	"context"
	"slices"
	"time"

	"github.com/ax-sched/ax/task"
)

// Upstreams is what the gates of schedules' runs need of the schedules;
// package schedule implements it over the global etcd.
type Upstreams interface {
	// RunEnded records that the run id of tenant's schedule, started for
	// the period beginning at period, ended in state, and wakes the gates
	// waiting for it wherever they are (WatchEnds).
	RunEnded(ctx context.Context, tenant, schedule string, period time.Time, id string, state task.DAGState) error
	// WatchEnds calls wake, from one goroutine, with the tenant and
	// schedule of every run end recorded, until ctx ends; wake("", "")
	// means any schedule (ends may have been missed).
	WatchEnds(ctx context.Context, wake func(tenant, schedule string))
	// Reruns lists the run ids of the reruns of tenant's schedule's period
	// beginning at period, oldest first.
	Reruns(ctx context.Context, tenant, schedule string, period time.Time) ([]string, error)
}

// SetUpstreams gives the runs the schedules their gates wait for; it is
// called before Loop. Without it, gates are read every pass and a rerun of
// an upstream period is not seen.
func (r *Runs) SetUpstreams(u Upstreams) { r.ups = u }

// gateRecheck is how long a gate goes without a read when no end woke it:
// a safety net for ends the watch missed (a watch restarting, a record
// lost with the server that ended the run, a task started before its
// schedule's runs recorded their ends), not the way a gate normally opens.
const gateRecheck = 30 * time.Second

// gateReads is what the reconciler knows of the upstreams of one run's
// gates between reads.
type gateReads struct {
	keys []string            // tenant/schedule of each upstream
	last map[string]upstream // by upstream run id
	next time.Time           // the next read, unless an end wakes it first
}

func upstreamKey(tenant, schedule string) string { return tenant + "/" + schedule }

// wake forces a read of the gates waiting for tenant's schedule ("", "":
// every gate) on the next pass, and starts that pass now.
func (rc *reconciler) wake(tenant, schedule string) {
	key := upstreamKey(tenant, schedule)
	rc.mu.Lock()
	rc.wakes++
	for id, gr := range rc.gates {
		if tenant == "" || slices.Contains(gr.keys, key) {
			delete(rc.gates, id)
		}
	}
	rc.mu.Unlock()
	select {
	case rc.kick <- struct{}{}:
	default:
	}
}

// upstreamsOf is what p's gates know of the runs they wait for. A gate is
// read when its upstream's run end wakes it (wake: a DAG run's end, or a
// single-task schedule's task's, recorded by the region that ended it), on
// the first pass of the term, when a deadline passes, and every
// gateRecheck; in between the last read stands.
func (rc *reconciler) upstreamsOf(ctx context.Context, p *runPass) map[string]upstream {
	gs := p.gatedRuns()
	if len(gs) == 0 {
		rc.mu.Lock()
		delete(rc.gates, p.id)
		rc.mu.Unlock()
		return nil
	}
	rc.mu.Lock()
	gr, wakes := rc.gates[p.id], rc.wakes
	rc.mu.Unlock()
	if gr != nil && rc.runs.ups != nil && p.now.Before(gr.next) {
		return gr.last
	}
	tenant := p.plan.def.Tenant
	got := rc.runs.readUpstreams(ctx, tenant, gs)
	next := p.now.Add(gateRecheck)
	var keys []string
	for _, g := range gs {
		if got[g.RunID] == upstreamUnread {
			next = p.now.Add(interval)
		}
		if !g.Deadline.IsZero() && g.Deadline.After(p.now) && g.Deadline.Before(next) {
			next = g.Deadline.Add(time.Millisecond)
		}
		keys = append(keys, upstreamKey(tenant, g.Schedule))
	}
	rc.mu.Lock()
	if rc.wakes != wakes {
		// An end may have been recorded after this read began.
		next = p.now
	}
	rc.gates[p.id] = &gateReads{keys: keys, last: got, next: next}
	rc.mu.Unlock()
	return got
}

// periodRuns is the runs that can open g: the run it names and, for a
// same_period gate not Exact, the reruns of that period, oldest first. A failure to
// list the reruns leaves the run it names, and is reported.
func (r *Runs) periodRuns(ctx context.Context, tenant string, g task.Gate) ([]string, error) {
	if r.ups == nil || g.Rule != task.GateSamePeriod || g.Period == nil || g.Exact {
		return []string{g.RunID}, nil
	}
	reruns, err := r.ups.Reruns(ctx, tenant, g.Schedule, *g.Period)
	return append([]string{g.RunID}, reruns...), err
}

// recordEnd records the end of a run a schedule started, for the gates
// waiting for it; a failure leaves them to their next read (gateRecheck).
func (r *Runs) recordEnd(ctx context.Context, p *runPass, state task.DAGState) {
	def := p.plan.def
	if r.ups == nil || def.Schedule == "" || def.PeriodStart == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.ups.RunEnded(cctx, def.Tenant, def.Schedule, *def.PeriodStart, p.id, state); err != nil && ctx.Err() == nil {
		r.log.Warn("DAG run end not recorded for the gates waiting for it; they read it within "+gateRecheck.String(),
			"dag", p.id, "schedule", def.Schedule, "err", err)
	}
}
