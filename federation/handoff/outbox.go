package handoff

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/pick"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// The hand-off sender: the outbox loop that moves tasks placed in other
// regions to them.

// Hand-off batching (OutboxLoop).
const (
	// handOffRead is how many due outbox tasks one pass reads per shard:
	// a target's full batches in flight.
	handOffRead = handOffInFlight * apiv1.MaxBatch
	// handOffBytes bounds the specs of one batch request, far below what a
	// receiver reads (≥ 64 MiB: httpapi's handoffBatch), so that a run of
	// large payloads never makes a request the receiver cuts off.
	handOffBytes = 16 << 20
	// handOffInFlight is how many batch requests to one target are in
	// flight at once (OutboxLoop). One at a time, a hand-off's rate was its
	// round trips': the sender and receiver sat mostly idle.
	handOffInFlight = 4
	// handOffTimeout bounds a single-item request. A batch stores its tasks
	// in one script of a few milliseconds; its longer bound is for moving up
	// to handOffBytes across regions.
	handOffTimeout      = 5 * time.Second
	handOffBatchTimeout = 10 * time.Second
	// noBatchFor is how long a target that does not serve the batch
	// endpoint (an older server) gets one task per request before a batch
	// is tried again.
	noBatchFor = 5 * time.Minute
)

// OutboxLoop hands tasks in the outbox to their target regions (a region
// leader loop). Each task goes to the same target with the same id until a
// definite answer: accepted (or already there) → HANDED_OFF; refused →
// placed again. Timeouts, 5xx, 401 and 429 retry the same target with
// backoff, so a lost answer never makes a second copy.
//
// The loop reads the due tasks at once when woken (Wake: a submit or a
// placement put tasks in the outbox), else every outboxPoll, and as soon as
// a request ends. Each pass sends the due tasks that are not in flight yet,
// grouped by target, in batch requests (POST /v1/internal/handoff/batch, at
// most apiv1.MaxBatch tasks and handOffBytes each), up to handOffInFlight
// requests in flight per target at once: a task that arrives while
// another batch to its target is on the way goes at once in a batch of its
// own. A single task goes to the single-item endpoint, which every server
// version serves, and so does every task for a target that has no batch
// endpoint.
//
// The answers are recorded under the leader's fence f: once a newer leader
// of the region has written, this loop's records are refused, it calls lost
// and stops. Sending needs no fence (a receiver accepts an id once, so two
// leaders sending one task make one copy), but recording does: two terms
// could get different definite answers about one id (refused, then
// accepted after the target gained the pool), and the older term's record
// of the refusal would place the task again at home while the target runs
// it.
func (n *Sender) OutboxLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	o := &outbox{n: n.env, fence: f, attempts: map[string]int{}, noBatch: map[string]time.Time{}, maybeSent: map[string]bool{},
		since: map[string]time.Time{}, firstTry: map[string]time.Time{}, inFlight: map[string]bool{}, endedAt: map[string]uint64{},
		targets: map[string]*target{}, freed: make(chan struct{}, 1)}
	o.lost = sync.OnceFunc(func() { lost(queue.ErrFenced) })
	defer o.wg.Wait()
	for ctx.Err() == nil && !o.fenced.Load() {
		o.mu.Lock()
		mark := o.ended
		o.mu.Unlock()
		// The records of tasks in flight are not read again: a wave of
		// them would be read at every wake while their requests run.
		flying := 0
		tasks, err := n.store.HandOffs().OutboxExcept(ctx, handOffRead, func(id string) bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.flying(id, mark) {
				flying++
				return true
			}
			return false
		})
		if err != nil {
			n.log.Warn("outbox read", "err", err)
		}
		wait := outboxPoll
		if o.dispatch(ctx, tasks, mark)+flying > 0 {
			// Tasks in flight came back in the read: the end of their
			// requests (freed) or a wake calls the next read, not the poll.
			wait = outboxBusyPoll
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-o.freed:
		case <-time.After(wait):
		}
	}
}

// Wake makes the outbox loop read the outbox now: tasks were put in it.
// Never blocks.
func (n *Sender) Wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// outboxPoll is how often an idle outbox loop reads the outbox: tasks
// another server of the region placed elsewhere (a standby's submits, its
// leader's placements) wake no loop, so they wait at most this long.
const outboxPoll = 25 * time.Millisecond

// outboxBusyPoll is outboxPoll while requests are in flight: a read then
// returns their tasks again, which costs the more the larger they are.
const outboxBusyPoll = 200 * time.Millisecond

// outbox is OutboxLoop's memory across rounds.
type outbox struct {
	n     *env
	fence queue.Fence
	lost  func() // the term is over: a newer leader's records exist
	wg    sync.WaitGroup
	freed chan struct{} // a request ended: its target may take more

	mu       sync.Mutex
	attempts map[string]int // task id → unanswered attempts so far (its backoff)
	// maybeSent holds the tasks of which some attempt may have reached its
	// target (anything but a failed dial): only those must wait for a
	// definite answer. A task whose every attempt failed to connect was
	// never seen by the target, so it can be placed again without any risk
	// of a second copy (docs/architecture.md, region loss). Memory only: after
	// a restart every unanswered task counts as maybe sent.
	maybeSent map[string]bool
	// since is when a task's first unanswered attempt was settled: a task
	// that may have been sent is placed again once its target has been
	// unreachable for Config.HandOffHorizon since then (the target holds
	// any copy it got until this region's word: held.go).
	since map[string]time.Time
	// firstTry is when a task's first unanswered attempt began: one that
	// has failed to connect for strandedFor is placed again.
	firstTry map[string]time.Time
	inFlight map[string]bool // tasks in a request now: not sent again until it ends
	// ended counts the requests that ended; endedAt is the count when each
	// task's last request ended. A read of the outbox that began before a
	// task's request ended may still list it: dispatch skips it.
	ended   uint64
	endedAt map[string]uint64
	targets map[string]*target   // by region
	noBatch map[string]time.Time // target → until when it gets one task per request
	fenced  atomic.Bool          // a record was refused: the loop stops
}

// target is what the outbox holds for one target region (under o.mu).
type target struct {
	busy int // requests in flight
	// words are the tasks recorded as handed off whose word (commit) the
	// target has not had yet: the next batch to it carries them, or a
	// commit request of their own once no request to it is in flight.
	words []string
}

// take removes and returns the words a batch request carries: the oldest
// apiv1.MaxBatch, as many as a receiver takes in one request (it refuses
// the whole batch, tasks included, over that). The rest wait for the next
// request to the target, or for commit once none is in flight.
func (tg *target) take() []string {
	n := min(len(tg.words), apiv1.MaxBatch)
	out := tg.words[:n:n]
	tg.words = slices.Clone(tg.words[n:])
	return out
}

// forget drops what the outbox remembers of a task once it is settled
// (o.mu held).
func (o *outbox) forget(id string) {
	delete(o.attempts, id)
	delete(o.maybeSent, id)
	delete(o.since, id)
	delete(o.firstTry, id)
}

// verdict is what a target's answer means for one task.
type verdict int

const (
	handedOff  verdict = iota + 1 // accepted, or already held by the target
	refused                       // a definite refusal: the task is placed again
	unanswered                    // no definite answer: the same target again, later
)

type answer struct {
	t        *task.Task
	v        verdict
	canceled bool      // handedOff: the target also carried out the cancel the item carried
	err      error     // refused or unanswered: why
	at       time.Time // when the attempt began; zero: not attempted
}

// parcel is the tasks of one request to one target.
type parcel struct {
	tasks []*task.Task
	items []apiv1.HandOff
	// commit is this region's word on earlier hand-offs to the target,
	// carried by a batch request (apiv1.HandOffBatch.Commit).
	commit []string
}

// definite reports whether a 4xx refuses for good: 401 and 403 (a cluster
// token being rotated or mistyped: a configuration fault, not the task's)
// and 429 (busy) may pass, so tasks wait for the same target instead of
// being placed again and again while the tokens disagree.
func definite(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return false
	}
	return status/100 == 4
}

// flying reports whether task id is in a request, or its request ended
// after mark (o.mu held): a read of the outbox begun at mark may predate
// its answer's record.
func (o *outbox) flying(id string, mark uint64) bool {
	return o.inFlight[id] || o.endedAt[id] > mark
}

// dispatch starts requests for the due tasks not in flight, grouped by
// target, as many as each target has free requests for (handOffInFlight);
// the rest wait for the next pass. tasks were read after mark requests had
// ended: a task whose request ended since is skipped (the read may predate
// its answer's record). It returns how many tasks were in flight already.
func (o *outbox) dispatch(ctx context.Context, tasks []*task.Task, mark uint64) (flying int) {
	byTarget := map[string][]*task.Task{}
	var targets []string
	o.mu.Lock()
	for _, t := range tasks {
		if o.flying(t.ID, mark) {
			flying++
			continue
		}
		if _, ok := byTarget[t.HandOffTarget]; !ok {
			targets = append(targets, t.HandOffTarget)
		}
		byTarget[t.HandOffTarget] = append(byTarget[t.HandOffTarget], t)
	}
	for id, at := range o.endedAt {
		if at <= mark {
			delete(o.endedAt, id)
		}
	}
	o.mu.Unlock()
	for _, name := range targets {
		o.start(ctx, name, byTarget[name])
	}
	return flying
}

// start sends one target's tasks in parcels, each in a request of its own,
// while the target has free requests.
func (o *outbox) start(ctx context.Context, name string, tasks []*task.Task) {
	o.mu.Lock()
	free := handOffInFlight - o.target(name).busy
	o.mu.Unlock()
	if free <= 0 {
		return
	}
	r, ok := o.n.view.Region(name)
	if !ok || r.API == "" {
		o.settle(ctx, name, unansweredAll(tasks, fmt.Errorf("%w: region %s not in the view", peer.ErrNotSent, name)))
		return
	}
	// A parcel holds up to apiv1.MaxBatch tasks: read the trails of those
	// that can go now.
	tasks = tasks[:min(len(tasks), free*apiv1.MaxBatch)]
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	// The trails travel with the tasks; without them the hand-off still
	// goes (the receiver's trail then starts at its RECEIVED step).
	trails, err := o.n.store.Tasks().Trails(ctx, ids)
	if err != nil {
		o.n.log.Warn("hand-off: reading trails failed; sending without them", "err", err)
	}
	parcels := parcelsOf(tasks, trails, o.n.cfg.Region, o.n.cfg.Now())
	o.mu.Lock()
	defer o.mu.Unlock()
	tg := o.target(name)
	for _, p := range parcels[:min(len(parcels), handOffInFlight-tg.busy)] {
		for _, t := range p.tasks {
			o.inFlight[t.ID] = true
		}
		tg.busy++
		o.wg.Go(func() { o.fly(ctx, name, r.API, p) })
	}
}

// target is the outbox's state of a target region (o.mu held).
func (o *outbox) target(name string) *target {
	tg := o.targets[name]
	if tg == nil {
		tg = &target{}
		o.targets[name] = tg
	}
	return tg
}

// fly sends one parcel with the words the target is owed, settles its
// answers, and sends the words left once no other request to the target
// is in flight (a receiver accepts an id once, so parcels in flight side
// by side are safe).
func (o *outbox) fly(ctx context.Context, name, api string, p parcel) {
	o.mu.Lock()
	tg := o.target(name)
	p.commit = tg.take()
	o.mu.Unlock()
	words, delivered, _ := o.sendParcel(ctx, name, api, p)
	o.mu.Lock()
	if !delivered {
		tg.words = append(tg.words, p.commit...)
	}
	tg.words = append(tg.words, words...)
	o.ended++
	for _, t := range p.tasks {
		delete(o.inFlight, t.ID)
		o.endedAt[t.ID] = o.ended
	}
	tg.busy--
	var owed []string
	if tg.busy == 0 {
		owed, tg.words = tg.words, nil
	}
	o.mu.Unlock()
	o.commit(ctx, name, api, owed)
	select {
	case o.freed <- struct{}{}:
	default:
	}
}

// sendParcel sends one parcel (a batch request, or one task per request
// to a target without the batch endpoint) and settles its answers. It
// returns the tasks recorded as handed off (their word is still to be
// sent), whether the parcel's own commit reached the target, and the error
// of a request that got no definite answer (the parcel's tasks not sent
// then are unanswered).
func (o *outbox) sendParcel(ctx context.Context, target, api string, p parcel) (words []string, delivered bool, failed error) {
	var as []answer
	each := len(p.tasks) == 1 || o.single(target)
	start := o.n.cfg.Now()
	spans := o.n.planHandOffs(p.tasks)
	if !each {
		as, failed, each = o.sendBatch(ctx, target, api, p, spans)
		if failed == nil && !each {
			o.landed(p.commit) // the target has them
			delivered = true
		}
	}
	if each {
		as, failed = o.sendEach(ctx, api, p, spans)
	}
	if failed != nil {
		as = append(as, unansweredAll(p.tasks[len(as):], notSent(target, failed))...)
	}
	for i := range as {
		if as[i].at.IsZero() {
			as[i].at = start
		}
	}
	words = o.settle(ctx, target, as)
	o.n.traceHandOff(start, target, as, spans)
	return words, delivered, failed
}

// commit sends this region's word on hand-offs it recorded as accepted by
// target: the target runs them from now on. Best effort: a target that
// does not get it asks for it (HeldLoop).
func (o *outbox) commit(ctx context.Context, target, api string, ids []string) {
	for start := 0; start < len(ids); start += apiv1.MaxBatch {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handOffTimeout)
		var resp apiv1.HandOffCommitResponse
		_, err := o.n.peer.Call(cctx, api, http.MethodPost, "/v1/internal/handoff/commit",
			apiv1.HandOffCommit{From: o.n.cfg.Region, IDs: ids[start:min(start+apiv1.MaxBatch, len(ids))]}, &resp)
		cancel()
		if err != nil {
			o.n.log.Info("hand-off commit unanswered; the target will ask for it", "target", target, "n", len(ids)-start, "err", err)
			return
		}
		o.landed(ids[start:min(start+apiv1.MaxBatch, len(ids))])
	}
}

// landed records that the target counts ids READY now (they have the
// word): from its next figures on, they are in its fill, not in flight. A
// task whose word is lost stays in flight until the flights' horizon.
func (o *outbox) landed(ids []string) {
	now := o.n.cfg.Now()
	for _, id := range ids {
		o.n.flights.Landed(id, now)
	}
}

// handOffOf is the wire form of a task handed off with its history.
func handOffOf(t *task.Task, spec json.RawMessage, trail []task.Transition, region string, now time.Time) apiv1.HandOff {
	created := t.CreatedAt
	// The HANDED_OFF step is recorded here once the receiver accepts; the
	// carried trail has it already, as of the sending.
	trail = queue.CapTrail(append(trail[:len(trail):len(trail)], task.Transition{At: now, From: task.Pending, To: task.HandedOff,
		Reason: task.ReasonHandedOff, By: t.HandOffTarget + "/" + t.Pool, Attempt: t.Attempts, Region: region}))
	return apiv1.HandOff{ID: t.ID, Pool: t.Pool, Spec: spec, Cancel: t.CancelRequested, From: region,
		Attempts: t.Attempts, PreemptCount: t.PreemptCount, CreatedAt: &created, LastError: t.LastError, Trail: trail, Budget: t.BudgetHold}
}

// parcelsOf cuts one target's tasks into requests of at most apiv1.MaxBatch
// tasks and handOffBytes of specs (a larger task goes alone).
func parcelsOf(tasks []*task.Task, trails map[string][]task.Transition, region string, now time.Time) []parcel {
	var out []parcel
	var cur parcel
	size := 0
	for _, t := range tasks {
		spec, _ := json.Marshal(t.Spec())
		item := handOffOf(t, spec, trails[t.ID], region, now)
		sz := len(spec) + len(t.ID) + len(t.Pool) + len(item.LastError) + 160*len(item.Trail) + 96
		if len(cur.tasks) > 0 && (len(cur.tasks) == apiv1.MaxBatch || size+sz > handOffBytes) {
			out = append(out, cur)
			cur, size = parcel{}, 0
		}
		cur.tasks = append(cur.tasks, t)
		cur.items = append(cur.items, item)
		size += sz
	}
	if len(cur.tasks) > 0 {
		out = append(out, cur)
	}
	return out
}

// single reports whether target gets one task per request for now.
func (o *outbox) single(target string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().Before(o.noBatch[target])
}

// sendBatch sends a parcel in one batch request. failed is set when the
// request got no definite answer (every answer is unanswered then). each
// is set when the target refused the request itself, not its tasks (no
// batch endpoint: an older server; or a shape it does not take): nothing
// was decided, and the parcel goes one task per request.
func (o *outbox) sendBatch(ctx context.Context, target, api string, p parcel, spans handOffSpans) (as []answer, failed error, each bool) {
	cctx, cancel := context.WithTimeout(ctx, handOffBatchTimeout)
	defer cancel()
	var resp apiv1.HandOffBatchResponse
	_, err := o.n.peer.Call(cctx, api, http.MethodPost, "/v1/internal/handoff/batch", apiv1.HandOffBatch{Items: spans.items(p.items), Commit: p.commit}, &resp)
	var pe *peer.Error
	switch {
	case err == nil:
	case errors.As(err, &pe) && definite(pe.Status):
		if pe.Status == http.StatusNotFound || pe.Status == http.StatusMethodNotAllowed {
			o.mu.Lock()
			o.noBatch[target] = time.Now().Add(noBatchFor)
			o.mu.Unlock()
			o.n.log.Info("target has no batch hand-off endpoint; sending one task per request", "target", target, "for", noBatchFor)
		} else {
			o.n.log.Warn("target refused a hand-off batch; sending one task per request", "target", target, "err", err)
		}
		return nil, nil, true
	default:
		return unansweredAll(p.tasks, err), err, false
	}
	as = make([]answer, len(p.tasks))
	for i, t := range p.tasks {
		if i >= len(resp.Results) || resp.Results[i].ID != t.ID {
			as[i] = answer{t: t, v: unanswered, err: fmt.Errorf("no answer for item %d in the batch's answer", i)}
			continue
		}
		r := resp.Results[i]
		var why error = fmt.Errorf("peer answered %d for the item", r.Status)
		if r.Error != nil {
			why = &peer.Error{Status: r.Status, Body: *r.Error}
		}
		switch {
		case r.Accepted:
			as[i] = answer{t: t, v: handedOff, canceled: r.Canceled}
		case r.Status/100 == 2 || definite(r.Status):
			as[i] = answer{t: t, v: refused, err: why}
		default:
			as[i] = answer{t: t, v: unanswered, err: why}
		}
	}
	return as, nil, false
}

// sendEach sends a parcel one task per request, to the single-item
// endpoint, in turn, and stops at the first request that gets no definite
// answer (failed): the tasks after it are not sent.
func (o *outbox) sendEach(ctx context.Context, api string, p parcel, spans handOffSpans) (as []answer, failed error) {
	for i, t := range p.tasks {
		cctx, cancel := context.WithTimeout(tracing.WithPlanned(ctx, spans[t.ID]), handOffTimeout)
		var resp apiv1.HandOffResponse
		_, err := o.n.peer.Call(cctx, api, http.MethodPost, "/v1/internal/handoff", p.items[i], &resp)
		cancel()
		var pe *peer.Error
		switch {
		case err == nil && resp.Accepted:
			as = append(as, answer{t: t, v: handedOff, canceled: resp.Canceled})
		case err == nil:
			as = append(as, answer{t: t, v: refused, err: errors.New(resp.Reason)})
		case errors.As(err, &pe) && definite(pe.Status):
			as = append(as, answer{t: t, v: refused, err: err})
		default:
			return append(as, answer{t: t, v: unanswered, err: err}), err
		}
	}
	return as, nil
}

// notSent is why a task waits that was not sent after target left an
// earlier request unanswered (with failed).
func notSent(target string, failed error) error {
	return fmt.Errorf("not sent: %s did not answer an earlier request: %w", target, failed)
}

func unansweredAll(tasks []*task.Task, why error) []answer {
	as := make([]answer, len(tasks))
	for i, t := range tasks {
		as[i] = answer{t: t, v: unanswered, err: why}
	}
	return as
}

// settled is what settle made of one request's answers.
type settled struct {
	done    []queue.HandOffAnswer // definite answers, to record
	retries []queue.OutboxRetry   // unanswered tasks, due again later
	// The tasks by outcome: accepted, refused, unanswered (later), placed
	// again as never received (replaced), placed again past the horizon
	// (revoked).
	accepted, refused, later, replaced, revoked []string
	refusedErr, laterErr                        error         // the first of each kind
	wait                                        time.Duration // the shortest retry
}

// settle applies a target's answers: definite ones are recorded in one
// store call (handed off, or placed again), unanswered ones wait in the
// outbox with backoff and jitter; the in-flight counts, metrics and logs
// follow (one Info line per outcome and request, one Debug line per task).
// It returns the tasks recorded as handed off: the target may run them
// once it has this region's word (commit).
func (o *outbox) settle(ctx context.Context, target string, as []answer) (committed []string) {
	if len(as) == 0 {
		return nil
	}
	now := o.n.cfg.Now()
	s := o.classify(target, as, now)
	// Definite answers are recorded even when the loop is stopping: an
	// answer not recorded is asked for again, and the target repeats it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	committed, ok := o.record(rctx, target, s)
	if !ok {
		return nil
	}
	// An unanswered task of a stopping loop stays due: the next leader
	// sends it at once.
	if len(s.retries) > 0 && ctx.Err() == nil {
		if err := o.n.store.HandOffs().HandOffRetryMany(rctx, s.retries); err != nil {
			o.n.log.Warn("outbox retry", "target", target, "n", len(s.retries), "err", err)
		}
	}
	o.judge(target, s, now)
	o.report(ctx, target, s, as)
	return committed
}

// classify sorts answers by what follows from them, and forgets the tasks
// they settle.
func (o *outbox) classify(target string, as []answer, now time.Time) *settled {
	n := o.n
	s := &settled{}
	// One jitter per request: its retries stay together, in one batch.
	jitter := rand.Float64() / 4
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range as {
		id := a.t.ID
		switch a.v {
		case handedOff:
			o.forget(id)
			// In flight still, for placement's headroom: the target counts
			// it READY only once it has the word (landed there).
			s.done = append(s.done, queue.HandOffAnswer{ID: id, Accepted: true, Canceled: a.canceled})
			s.accepted = append(s.accepted, id)
		case refused:
			o.forget(id)
			n.flights.Drop(id)
			if pick.BacklogRefusal(a.err) {
				n.picker.NoteRefusal(target, a.t.Tenant, now)
			}
			s.done = append(s.done, queue.HandOffAnswer{ID: id, Accepted: false})
			s.refused = append(s.refused, id)
			s.refusedErr = cmp.Or(s.refusedErr, a.err)
		default:
			o.unanswered(target, a, now, jitter, s)
		}
	}
	return s
}

// unanswered settles a task without a definite answer (o.mu held): placed
// again when its target stayed unreachable past the horizon (revoked) or
// never saw it (replaced), else due again after its backoff.
func (o *outbox) unanswered(target string, a answer, now time.Time, jitter float64, s *settled) {
	n, id := o.n, a.t.ID
	if !peer.NeverSent(a.err) {
		o.maybeSent[id] = true
	}
	if _, ok := o.since[id]; !ok {
		o.since[id] = now
		o.firstTry[id] = cmp.Or(a.at, now)
	}
	switch {
	case o.maybeSent[id] && now.Sub(o.since[id]) >= n.cfg.HandOffHorizon && !n.view.Healthy(target):
		// The target may hold it, unrun until this region's word: revoked
		// here, it is dropped there (held.go).
		o.forget(id)
		n.flights.Drop(id)
		s.done = append(s.done, queue.HandOffAnswer{ID: id, Revoked: true})
		s.revoked = append(s.revoked, id)
	case !o.maybeSent[id] && o.stranded(target, id, a.err, now):
		// The target is down and never saw this task: place it again
		// (HANDOFF_REFUSED) instead of waiting for the region to return.
		o.forget(id)
		n.flights.Drop(id)
		s.done = append(s.done, queue.HandOffAnswer{ID: id, Accepted: false})
		s.replaced = append(s.replaced, id)
	default:
		o.attempts[id]++
		d := min(100*time.Millisecond<<min(o.attempts[id], 9), 30*time.Second)
		d += time.Duration(float64(d) * jitter)
		s.retries = append(s.retries, queue.OutboxRetry{ID: id, At: now.Add(d)})
		s.later = append(s.later, id)
		s.laterErr = cmp.Or(s.laterErr, a.err)
		if s.wait == 0 || d < s.wait {
			s.wait = d
		}
	}
}

// record records the definite answers under the fence and returns the
// tasks recorded as handed off. ok is false when a newer leader exists:
// the tasks are its to settle, and the loop stops.
func (o *outbox) record(ctx context.Context, target string, s *settled) (committed []string, ok bool) {
	n := o.n
	if len(s.done) == 0 {
		return nil, true
	}
	errs, err := n.store.HandOffs().HandOffDoneMany(ctx, s.done, o.fence)
	switch {
	case errors.Is(err, queue.ErrFenced):
		n.log.Warn("hand-off answers not recorded: a newer leader exists", "target", target, "n", len(s.done))
		o.fenced.Store(true)
		o.lost()
		return nil, false
	case err != nil:
		n.log.Warn("hand-off answers not recorded; asking again", "target", target, "n", len(s.done), "err", err)
		return nil, true
	}
	resend := map[string]bool{}
	for i, err := range errs {
		switch {
		case errors.Is(err, queue.ErrSendCancel):
			n.log.Info("cancel requested during the hand-off; sending it again with the cancel", "id", s.done[i].ID, "target", target)
			resend[s.done[i].ID] = true
		case err != nil:
			n.log.Warn("hand-off answer not recorded", "id", s.done[i].ID, "accepted", s.done[i].Accepted, "err", err)
		case s.done[i].Accepted:
			committed = append(committed, s.done[i].ID)
		}
	}
	// A resent task is counted when the repeat (with the cancel) is answered.
	s.accepted = slices.DeleteFunc(s.accepted, func(id string) bool { return resend[id] })
	return committed, true
}

// judge tells the view what the answers say of the target: a definite
// answer vouches for it; none at all (every task unanswered for want of a
// reply) makes it a suspect, so placement stops sending new work there now
// rather than when its registration expires.
func (o *outbox) judge(target string, s *settled, now time.Time) {
	gaveUp := len(s.replaced) + len(s.revoked)
	switch {
	case len(s.done) > gaveUp:
		o.n.view.Vouch(target)
	case len(s.later)+gaveUp > 0 && (gaveUp > 0 || peer.NoReply(s.laterErr)):
		o.n.view.Suspect(target, now)
	}
}

// report counts and logs the outcomes of one request: one line per
// outcome, and one Debug line per task.
func (o *outbox) report(ctx context.Context, target string, s *settled, as []answer) {
	n := o.n
	m := n.metrics.Handoffs
	if len(s.revoked) > 0 {
		m.WithLabelValues(n.cfg.Region, target, "revoked").Add(float64(len(s.revoked)))
		n.log.Warn("hand-offs to a region unreachable past the horizon placed again; it drops any copy it holds", "target", target,
			"n", len(s.revoked), idsAttr(s.revoked), "horizon", n.cfg.HandOffHorizon, "reason", task.ReasonHandOffRevoked)
		n.wake()
	}
	if len(s.replaced) > 0 {
		m.WithLabelValues(n.cfg.Region, target, "replaced").Add(float64(len(s.replaced)))
		n.log.Warn("hand-offs to an unreachable region placed again (it never received them)", "target", target,
			"n", len(s.replaced), idsAttr(s.replaced), "reason", task.ReasonHandOffRefused)
	}
	if len(s.accepted) > 0 {
		m.WithLabelValues(n.cfg.Region, target, "accepted").Add(float64(len(s.accepted)))
		n.log.Info("handed off", "target", target, "n", len(s.accepted), idsAttr(s.accepted), "reason", task.ReasonHandedOff)
	}
	if len(s.refused) > 0 {
		m.WithLabelValues(n.cfg.Region, target, "refused").Add(float64(len(s.refused)))
		n.log.Info("hand-off refused; placing again", "target", target, "n", len(s.refused), idsAttr(s.refused),
			"reason", task.ReasonHandOffRefused, "err", s.refusedErr)
		n.wake()
	}
	if len(s.later) > 0 {
		m.WithLabelValues(n.cfg.Region, target, "retry").Add(float64(len(s.later)))
		n.log.Info("hand-off unanswered; retrying the same target", "target", target, "n", len(s.later), idsAttr(s.later),
			"in", s.wait, "err", s.laterErr)
	}
	if n.log.Enabled(ctx, slog.LevelDebug) {
		for _, a := range as {
			args := []any{"id", a.t.ID, "trace_id", a.t.TraceID, "target", target, "pool", a.t.Pool}
			switch a.v {
			case handedOff:
				args = append(args, "outcome", "accepted", "reason", task.ReasonHandedOff)
			case refused:
				args = append(args, "outcome", "refused", "reason", task.ReasonHandOffRefused, "err", a.err)
			default:
				args = append(args, "outcome", "retry", "err", a.err)
			}
			n.log.Debug("hand-off", args...)
		}
	}
}

// idsAttr names the tasks of a log line: the id of one, the first 8 of
// more (the count is logged beside).
func idsAttr(ids []string) slog.Attr {
	if len(ids) == 1 {
		return slog.String("id", ids[0])
	}
	return slog.Any("ids", ids[:min(len(ids), 8)])
}

// stranded reports whether a task never sent to target (o.mu held) is
// to be placed elsewhere: it has failed to connect strandedAfter times
// while placement counts the target down (refused connections fail fast:
// about 1.5 s with the backoff), or for strandedFor with its last dial
// getting no handshake at all (SYNs dropped: a partition), whatever the
// view says yet.
func (o *outbox) stranded(target, id string, err error, now time.Time) bool {
	return o.attempts[id]+1 >= strandedAfter && !o.n.view.Healthy(target) ||
		peer.DialTimedOut(err) && now.Sub(o.firstTry[id]) >= strandedFor
}

// strandedAfter is how many failed dials to a target that placement no
// longer considers healthy make an outbox task be placed elsewhere.
const strandedAfter = 3

// strandedFor is how long a task's dials may fail before it is placed
// elsewhere: one dial that got no handshake at all.
const strandedFor = peer.DialTimeout
