package submit

import (
	"context"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/health"
)

// Group commit of small submits. Concurrent calls of a few tasks each (an
// API's single submits) on one shard share one submit script call: while
// groupInFlight calls of a shard are under way, the calls that arrive wait
// in a queue, and the next call to go takes every compatible waiting one
// with it (up to groupMax tasks). A lone call is never delayed: with no
// call under way it goes at once. Each call gets its own tasks' results;
// the script runs the tasks in order as it runs one call's, so keys,
// quotas of the backlog and admission limits hold as for calls made one
// after the other, and an error of the shared call (an outage: unsent, or
// maybe run) is every member's, as it would have been each one's alone.
const (
	// groupSolo: a call of more tasks than this goes alone (it is a batch
	// already).
	groupSolo = 16
	// groupMax bounds the tasks of one grouped script call: a longer script
	// holds Redis longer for every other client.
	groupMax = 256
	// groupInFlight is the most grouped script calls of one shard (and
	// lane) under way at once from this process: two keep Redis busy while
	// the next group forms and the last one's answers are read.
	groupInFlight = 2
)

// committer groups the small submits of one Submitter, per shard and lane
// (API requests, whose calls go through the Redis health gate, apart from
// the server's own).
type committer struct {
	lanes [][2]groupLane
}

func newCommitter(shards int) *committer {
	return &committer{lanes: make([][2]groupLane, shards)}
}

// groupLane is one shard's queue of waiting calls of one lane.
type groupLane struct {
	mu       sync.Mutex
	inFlight int
	waiting  []*groupCall
}

// groupCall is one caller's tasks, waiting to be sent or under way.
type groupCall struct {
	ctx   context.Context
	tasks []queue.NewTask
	ids   []string
	res   []queue.SubmitResult
	admit map[string]int      // pool → AdmitMax of its tasks admitted by it
	caps  map[string][2]int64 // tenant → its backlog caps (0: none)
	err   error
	// ready is closed once: when the call's results (or err) are set, or
	// when the call is made the one that sends the next group (lead).
	ready chan struct{}
	lead  bool
	taken bool // in a group under way: its answer will come
}

// submit is submitShard's runShard for tasks idx of a small call on shard
// over the pooled client, in a group with other such calls.
func (c *committer) submit(ctx context.Context, s *Submitter, shard int, tasks []queue.NewTask, ids []string, idx []int, res []queue.SubmitResult) (unsent []int, err error) {
	call := &groupCall{ctx: ctx, tasks: make([]queue.NewTask, len(idx)), ids: make([]string, len(idx)), ready: make(chan struct{})}
	for k, i := range idx {
		call.tasks[k], call.ids[k] = tasks[i], ids[i]
	}
	call.admit, call.caps = groupCaps(call.tasks)
	lane := 0
	if health.IsGated(ctx) {
		lane = 1
	}
	l := &c.lanes[shard][lane]
	l.mu.Lock()
	lead := l.inFlight < groupInFlight
	if lead {
		l.inFlight++
		call.lead = true
	} else {
		l.waiting = append(l.waiting, call)
	}
	l.mu.Unlock()
	if !lead && !call.wait(l) {
		return idx, ctx.Err()
	}
	// Past wait, ready was closed after lead was set: reading it is safe.
	if call.lead {
		l.send(s, shard, call)
	}
	if call.err != nil {
		return idx, call.err
	}
	for k, i := range idx {
		res[i] = call.res[k]
	}
	return nil, nil
}

// wait waits for the call's answer or its turn to lead. false: ctx ended
// while the call still waited unsent, and it left the queue.
func (call *groupCall) wait(l *groupLane) bool {
	select {
	case <-call.ready:
		return true
	case <-call.ctx.Done():
	}
	l.mu.Lock()
	if !call.taken && !call.lead {
		for k, w := range l.waiting {
			if w == call {
				l.waiting = append(l.waiting[:k], l.waiting[k+1:]...)
				break
			}
		}
		l.mu.Unlock()
		return false
	}
	l.mu.Unlock()
	<-call.ready
	return true
}

// send sends the group of first, the caller's call, with waiting calls,
// then hands the lead to the next waiting call, if any.
func (l *groupLane) send(s *Submitter, shard int, first *groupCall) {
	l.mu.Lock()
	group := l.take(first)
	l.mu.Unlock()
	s.sendGroup(shard, group)
	l.mu.Lock()
	l.inFlight--
	if len(l.waiting) > 0 && l.inFlight < groupInFlight {
		next := l.waiting[0]
		l.waiting = l.waiting[1:]
		next.lead = true
		l.inFlight++
		close(next.ready)
	}
	l.mu.Unlock()
}

// take is first's group: first and the waiting calls whose limits agree
// with theirs, in order, up to groupMax tasks, taken from the queue.
// Called with l.mu held.
func (l *groupLane) take(first *groupCall) []*groupCall {
	var group, rest []*groupCall
	n := 0
	admit, caps := map[string]int{}, map[string][2]int64{}
	for _, w := range append([]*groupCall{first}, l.waiting...) {
		if n > 0 && (n+len(w.tasks) > groupMax || !agrees(admit, caps, w)) {
			rest = append(rest, w)
			continue
		}
		for p, v := range w.admit {
			admit[p] = v
		}
		for t, v := range w.caps {
			caps[t] = v
		}
		w.taken = true
		n += len(w.tasks)
		group = append(group, w)
	}
	l.waiting = rest
	return group
}

// agrees reports whether call's admission limits and backlog caps are
// those of the group (admit, caps) wherever both name a pool or tenant:
// the script holds one limit per pool and one cap per tenant per call.
func agrees(admit map[string]int, caps map[string][2]int64, call *groupCall) bool {
	for p, v := range call.admit {
		if g, ok := admit[p]; ok && g != v {
			return false
		}
	}
	for t, v := range call.caps {
		if g, ok := caps[t]; ok && g != v {
			return false
		}
	}
	return true
}

// groupCaps are the admission limits (admitCaps) and backlog caps
// (backlogCaps) tasks carry, per pool and per tenant.
func groupCaps(tasks []queue.NewTask) (map[string]int, map[string][2]int64) {
	admit, caps := map[string]int{}, map[string][2]int64{}
	for _, t := range tasks {
		if t.AdmitMax > 0 && t.Pool != "" && t.HandOff == "" {
			if _, ok := admit[t.Pool]; !ok {
				admit[t.Pool] = t.AdmitMax
			}
		}
		tn := queue.BacklogTenant(t.Spec.Tenant)
		if _, ok := caps[tn]; !ok {
			caps[tn] = [2]int64{int64(max(t.BacklogMax, 0)), max(t.BacklogBytesMax, 0)}
		}
	}
	return admit, caps
}

// sendGroup runs the group's tasks in one script call and answers each
// call. The call outlives any one member's request (one leaving must not
// fail the others): it ends at the latest member's deadline.
func (s *Submitter) sendGroup(shard int, group []*groupCall) {
	var tasks []queue.NewTask
	var ids []string
	var deadline time.Time
	bounded := true
	for _, c := range group {
		tasks = append(tasks, c.tasks...)
		ids = append(ids, c.ids...)
		if d, ok := c.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(deadline) {
			deadline = d
		}
	}
	ctx := context.WithoutCancel(group[0].ctx)
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = i
	}
	res := make([]queue.SubmitResult, len(tasks))
	_, err := s.runShard(ctx, s.Client(), shard, tasks, ids, idx, res)
	at := 0
	for _, c := range group {
		c.res, c.err = res[at:at+len(c.tasks)], err
		at += len(c.tasks)
		if !c.lead {
			close(c.ready)
		}
	}
}
