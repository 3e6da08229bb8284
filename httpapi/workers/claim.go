package workers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// callTimeout bounds one store call made for a worker.
const callTimeout = 5 * time.Second

// refusedDelay is how long a task of a tenant outside the token waits
// before it is READY again: the claim that returned it does not take it
// again at once.
const refusedDelay = time.Second

func (h *Handlers) register(w http.ResponseWriter, r *http.Request, sc scope) error {
	var req apiv1.WorkerRegister
	if err := endpoint.Decode(w, r, 64<<10, &req); err != nil {
		return err
	}
	if err := h.checkRegister(&req, sc); err != nil {
		return err
	}
	se := session{ID: newID(), Token: sc.token, Pool: req.Pool, Types: req.Types, Slots: req.Slots, Name: req.Name, Labels: req.Labels}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if err := h.sessions.create(ctx, se); err != nil {
		return err
	}
	// Alive in its pool at once: a pool's published slots are its live
	// workers'.
	if _, err := h.cfg.Claimer.Heartbeat(ctx, se.ID, se.Pool, se.Slots, typesOf(se.Types), nil); err != nil {
		return err
	}
	h.metrics.registered.WithLabelValues(se.Pool).Inc()
	opts := h.cfg.Claimer.Options()
	endpoint.WriteJSON(w, http.StatusCreated, apiv1.WorkerRegistered{WorkerID: se.ID, Region: h.cfg.Region,
		LeaseMS: int(opts.Lease.Milliseconds()), HeartbeatMS: int(h.cfg.Heartbeat.Milliseconds()),
		MaxWaitMS: int(h.cfg.Limits.MaxWait.Milliseconds()), MaxClaim: apiv1.MaxWorkerClaim,
		MaxResultBytes: h.cfg.Limits.MaxResultBytes})
	return nil
}

func (h *Handlers) checkRegister(req *apiv1.WorkerRegister, sc scope) error {
	bad := func(code, field, msg string) error { return &endpoint.Error{Code: code, Field: field, Msg: msg} }
	switch {
	case req.Pool == "":
		return bad(apiv1.CodeInvalid, "pool", "required")
	case !slices.Contains(h.cfg.Pools, req.Pool):
		return bad(apiv1.CodeNotFound, "pool", "no pool "+req.Pool+" in "+h.cfg.Region)
	case !sc.pool(req.Pool):
		return bad(apiv1.CodeForbidden, "pool", "this token may not serve pool "+req.Pool)
	case req.Slots < 1 || req.Slots > apiv1.MaxWorkerSlots:
		return bad(apiv1.CodeInvalid, "slots", "must be 1.."+strconv.Itoa(apiv1.MaxWorkerSlots))
	case len(req.Name) > 256:
		return bad(apiv1.CodeInvalid, "name", "at most 256 bytes")
	case len(req.Labels) > task.MaxTags:
		return bad(apiv1.CodeInvalid, "labels", "at most "+strconv.Itoa(task.MaxTags)+" labels")
	case len(req.Types) > queue.MaxWorkerTypes:
		return bad(apiv1.CodeInvalid, "types", "at most "+strconv.Itoa(queue.MaxWorkerTypes)+" types")
	}
	for k, v := range req.Labels {
		if len(k) > 64 || len(v) > 256 {
			return bad(apiv1.CodeInvalid, "labels."+k, "keys at most 64 bytes, values 256")
		}
	}
	for i, t := range req.Types {
		field := "types[" + strconv.Itoa(i) + "]"
		if err := task.CheckType(t); err != nil {
			return bad(apiv1.CodeInvalid, field, err.Error())
		}
		if !sc.typ(t) {
			return bad(apiv1.CodeForbidden, field, "this token may not take tasks of type "+t)
		}
	}
	if len(req.Types) == 0 && !sc.all && len(sc.ws.Types) > 0 {
		req.Types = slices.Clone(sc.ws.Types) // every type the token allows
	}
	return nil
}

// typesOf is a registration's types as the store takes them (every type
// when it names none).
func typesOf(types []string) queue.Types {
	if len(types) == 0 {
		return queue.AnyType
	}
	t, err := queue.ServeTypes(types...)
	if err != nil {
		return queue.AnyType
	}
	return t
}

// served is what a worker may be handed now: its registered types that its
// token (as reloaded) still allows; ok false when its pool is no longer
// the token's.
func (se session) served(sc scope) (queue.Types, bool) {
	if !sc.pool(se.Pool) {
		return queue.Types{}, false
	}
	if sc.all || len(sc.ws.Types) == 0 {
		return typesOf(se.Types), true
	}
	types := se.Types
	if len(types) == 0 {
		types = sc.ws.Types
	}
	var keep []string
	for _, t := range types {
		if sc.typ(t) {
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		t, _ := queue.ServeTypes()
		return t, true // serves no type: claims nothing
	}
	return typesOf(keep), true
}

func (h *Handlers) claim(w http.ResponseWriter, r *http.Request, sc scope) error {
	var req apiv1.WorkerClaimRequest
	if err := endpoint.Decode(w, r, 4<<10, &req); err != nil {
		return err
	}
	switch {
	case req.Max < 1 || req.Max > apiv1.MaxWorkerClaim:
		return &endpoint.Error{Code: apiv1.CodeInvalid, Field: "max", Msg: "must be 1.." + strconv.Itoa(apiv1.MaxWorkerClaim)}
	case req.WaitMS < 0 || time.Duration(req.WaitMS)*time.Millisecond > h.cfg.Limits.MaxWait:
		return &endpoint.Error{Code: apiv1.CodeInvalid, Field: "wait_ms", Msg: "must be 0.." + strconv.FormatInt(h.cfg.Limits.MaxWait.Milliseconds(), 10)}
	}
	id := r.PathValue("worker_id")
	lctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	se, hs, err := h.sessions.load(lctx, id, sc.token)
	cancel()
	if err != nil {
		return err
	}
	types, ok := se.served(sc)
	if !ok {
		return &endpoint.Error{Code: apiv1.CodeForbidden, Field: "worker_id", Msg: "this token may no longer serve pool " + se.Pool}
	}
	wait := time.Duration(req.WaitMS) * time.Millisecond
	release, err := h.polls.Acquire(sc.who())
	if err != nil {
		return err
	}
	defer release()
	h.metrics.longPolls.Inc()
	defer h.metrics.longPolls.Dec()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	n := min(req.Max, se.Slots-len(hs))
	if n <= 0 {
		began := time.Now()
		n = h.awaitFree(r.Context(), se.ID, sc.token, req.Max, se.Slots, wait)
		wait = max(wait-time.Since(began), 0)
	}
	tasks, err := h.claimFor(r.Context(), se, sc, types, n, wait)
	if err != nil {
		return err
	}
	out := apiv1.WorkerClaimResponse{Tasks: make([]apiv1.WorkerTask, 0, len(tasks))}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, wireTask(t))
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
	return nil
}

// freePoll is how often a claim that found no free slot reads the
// worker's held tasks again: a report (to any server of the region) frees
// them.
const freePoll = 10 * time.Millisecond

// awaitFree waits, up to wait, until the worker with id holds fewer than
// slots tasks here, and returns how many it may claim (at most max); 0
// when none freed in time.
func (h *Handlers) awaitFree(ctx context.Context, id, token string, max, slots int, wait time.Duration) int {
	end := time.Now().Add(wait)
	for {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			return 0
		}
		sleep(ctx, min(freePoll, left))
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, hs, err := h.sessions.load(lctx, id, token)
		cancel()
		if err != nil {
			return 0
		}
		if free := slots - len(hs); free > 0 {
			return min(max, free)
		}
	}
}

// claimFor claims up to n tasks for se, waiting up to wait for a first
// one; the tasks of tenants outside sc go back unseen.
func (h *Handlers) claimFor(ctx context.Context, se session, sc scope, types queue.Types, n int, wait time.Duration) ([]*task.Task, error) {
	end := time.Now().Add(wait)
	wasted := 0
	for {
		left := time.Until(end)
		if n <= 0 {
			// No free slot: wait out the poll (the worker asks again
			// after its next outcome).
			sleep(ctx, left)
			return nil, nil
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		c, err := h.cfg.Claimer.ClaimTasks(cctx, queue.ClaimRequest{Pool: se.Pool, Worker: se.ID, N: n, Types: types})
		cancel()
		keep := h.refuseForeign(c.Tasks, sc)
		if len(keep) > 0 {
			if ctx.Err() != nil {
				// The worker left: nobody will run them.
				h.giveBack(keep, task.ReasonWorkerShutdown)
				return nil, ctx.Err()
			}
			add := make(map[string]string, len(keep))
			for _, t := range keep {
				add[t.ID] = t.LeaseToken
			}
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			uerr := h.sessions.update(uctx, se.ID, add, nil)
			cancel()
			if uerr != nil {
				h.giveBack(keep, task.ReasonWorkerShutdown)
				return nil, uerr
			}
			h.metrics.claims.WithLabelValues(se.Pool).Add(float64(len(keep)))
			return keep, nil
		}
		if err != nil {
			return nil, err
		}
		if left <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		switch {
		case c.Parked > 0 && c.Parked < left:
			sleep(ctx, c.Parked)
		case len(c.Tasks) > 0:
			sleep(ctx, min(refusedDelay, left))
		default:
			if wasted > 0 {
				// A wake-up for tasks this worker does not serve: another
				// claimer's; let it take them before listening again.
				sleep(ctx, min(20*time.Millisecond<<min(wasted-1, 6), left))
			}
			if h.bells.wait(ctx, se.Pool, min(time.Until(end), bellPoll)) {
				wasted++
			} else {
				wasted = 0
			}
		}
	}
}

// refuseForeign gives back the tasks of tenants outside sc and returns
// the others.
func (h *Handlers) refuseForeign(ts []*task.Task, sc scope) []*task.Task {
	var keep, foreign []*task.Task
	for _, t := range ts {
		if sc.tenant(t.Tenant) {
			keep = append(keep, t)
		} else {
			foreign = append(foreign, t)
		}
	}
	if len(foreign) > 0 {
		h.metrics.refused.Add(float64(len(foreign)))
		h.giveBackAfter(foreign, task.ReasonTenantRefused, refusedDelay)
	}
	return keep
}

func (h *Handlers) giveBack(ts []*task.Task, reason string) { h.giveBackAfter(ts, reason, 0) }

func (h *Handlers) giveBackAfter(ts []*task.Task, reason string, delay time.Duration) {
	for _, t := range ts {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		if _, err := h.cfg.Recorder.Return(ctx, t.ID, t.LeaseToken, reason, delay); err != nil {
			h.log.Warn("remote worker: giving a task back failed; the reaper takes it after its lease", "task", t.ID, "err", err)
		}
		cancel()
	}
}

// wireTask is t as a remote worker gets it.
func wireTask(t *task.Task) apiv1.WorkerTask {
	start := time.Now()
	if t.StartedAt != nil {
		start = *t.StartedAt
	}
	tags := t.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return apiv1.WorkerTask{ID: t.ID, Type: t.Type, Payload: t.Payload, Attempt: t.Attempts, MaxRetries: t.MaxRetries,
		Priority: t.Priority, Tags: tags, Tenant: t.Tenant, TraceID: t.TraceID, Lease: t.LeaseToken,
		Deadline: start.Add(time.Duration(t.Timeout)).UTC()}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (h *Handlers) leave(w http.ResponseWriter, r *http.Request, sc scope) error {
	id := r.PathValue("worker_id")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, hs, err := h.sessions.load(ctx, id, sc.token)
	if err != nil {
		return err
	}
	for tid, hd := range hs {
		if _, err := h.cfg.Recorder.Return(ctx, tid, hd.Lease, task.ReasonWorkerShutdown, 0); err != nil && !lostLease(err) {
			return err
		}
	}
	if err := h.sessions.remove(ctx, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
