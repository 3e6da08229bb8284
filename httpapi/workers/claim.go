package workers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker/proxy"
)

// callTimeout bounds one call to the region's Redis made for a worker.
const callTimeout = proxy.CallTimeout

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
	if err := h.cfg.Claimer.Alive(ctx, se.worker()); err != nil {
		return err
	}
	h.metrics.registered.WithLabelValues(se.Pool).Inc()
	endpoint.WriteJSON(w, http.StatusCreated, apiv1.WorkerRegistered{WorkerID: se.ID, Region: h.cfg.Region,
		LeaseMS: int(h.cfg.Claimer.Lease().Milliseconds()), HeartbeatMS: int(h.cfg.Heartbeat.Milliseconds()),
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
	case len(req.Types) > proxy.MaxTypes:
		return bad(apiv1.CodeInvalid, "types", "at most "+strconv.Itoa(proxy.MaxTypes)+" types")
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

// worker is the registered worker as the region sees it, handed every
// type it registered (every type when it named none).
func (se session) worker() proxy.Worker {
	return proxy.Worker{ID: se.ID, Pool: se.Pool, Slots: se.Slots, AnyType: len(se.Types) == 0, Types: se.Types}
}

// served is the worker as it may be handed tasks now: its registered
// types that its token (as reloaded) still allows; ok false when its pool
// is no longer the token's.
func (se session) served(sc scope) (proxy.Worker, bool) {
	w := se.worker()
	if !sc.pool(se.Pool) {
		return w, false
	}
	if sc.all || len(sc.ws.Types) == 0 {
		return w, true
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
	w.AnyType, w.Types = false, keep // none kept: serves no type, claims nothing
	return w, true
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
	case len(req.ClaimID) > apiv1.MaxClaimID:
		return &endpoint.Error{Code: apiv1.CodeInvalid, Field: "claim_id", Msg: "at most " + strconv.Itoa(apiv1.MaxClaimID) + " bytes"}
	}
	id := r.PathValue("worker_id")
	lctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	se, hs, err := h.sessions.load(lctx, id, sc.token)
	cancel()
	if err != nil {
		return err
	}
	wk, ok := se.served(sc)
	if !ok {
		return &endpoint.Error{Code: apiv1.CodeForbidden, Field: "worker_id", Msg: "this token may no longer serve pool " + se.Pool}
	}
	if req.ClaimID != "" && req.ClaimID == se.Claim.ID {
		actx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), callTimeout)
		tasks, err := h.again(actx, se, hs)
		cancel()
		if err != nil {
			return err
		}
		if len(tasks) > 0 {
			writeTasks(w, tasks)
			return nil
		}
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
	room := se.Slots*task.MilliSlots - heldRoom(hs)
	if room <= 0 {
		began := time.Now()
		room = h.awaitFree(r.Context(), se.ID, sc.token, se.Slots, wait)
		wait = max(wait-time.Since(began), 0)
	}
	n := req.Max
	if room <= 0 {
		n = 0
	}
	tasks, err := h.claimFor(r.Context(), wk, sc, n, room, wait, req.ClaimID, routeClaim)
	if err != nil {
		return err
	}
	writeTasks(w, tasks)
	return nil
}

func writeTasks(w http.ResponseWriter, tasks []*task.Task) {
	out := apiv1.WorkerClaimResponse{Tasks: make([]apiv1.WorkerTask, 0, len(tasks))}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, wireTask(t))
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
}

// freePoll is how often a claim that found no free slot reads the
// worker's held tasks again: a report (to any server of the region) frees
// them.
const freePoll = 10 * time.Millisecond

// awaitFree waits, up to wait, until the tasks the worker with id holds
// here leave room in its slots, and returns that room (milli-slots); 0
// when none freed in time.
func (h *Handlers) awaitFree(ctx context.Context, id, token string, slots int, wait time.Duration) int {
	end := time.Now().Add(wait)
	for {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			return 0
		}
		t := time.NewTimer(min(freePoll, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0
		}
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, hs, err := h.sessions.load(lctx, id, token)
		cancel()
		if err != nil {
			return 0
		}
		if free := slots*task.MilliSlots - heldRoom(hs); free > 0 {
			return free
		}
	}
}

// Routes of ax_remote_worker_claims_total: the claim route, a report's claim.
const (
	routeClaim  = "claim"
	routeReport = "report"
)

// claimFor claims up to n tasks for w that fit room (milli-slots),
// waiting up to wait for a first one, and records them as held; the tasks of tenants outside sc go back
// unseen. With cid not "", each store claim is recorded as claim cid's
// before it is sent, and its answer after (again). route (routeClaim,
// routeReport) labels the tasks it counts.
func (h *Handlers) claimFor(ctx context.Context, w proxy.Worker, sc scope, n, room int, wait time.Duration, cid, route string) ([]*task.Task, error) {
	keep := func(ts []*task.Task) error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		return h.sessions.answered(uctx, w.ID, cid, ts)
	}
	var taking func() error
	if cid != "" {
		taking = func() error {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			return h.sessions.intend(uctx, w.ID, cid)
		}
	}
	c, err := h.cfg.Claimer.Claim(ctx, proxy.Request{Worker: w, N: n, Room: room, Wait: wait, Accept: sc.tenant, Keep: keep, Taking: taking})
	if c.Refused > 0 {
		h.metrics.refused.Add(float64(c.Refused))
	}
	if err == nil && len(c.Tasks) == 0 && cid != "" {
		// A retry of this claim then claims afresh, without looking for
		// tasks it took.
		err = keep(nil)
	}
	if err != nil {
		return nil, err
	}
	if len(c.Tasks) > 0 {
		h.metrics.claims.WithLabelValues(w.Pool, route).Add(float64(len(c.Tasks)))
	}
	return c.Tasks, nil
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
		Deadline: start.Add(time.Duration(t.Timeout)).UTC(), Parents: apiv1.WireParents(t.Parents), Slots: float64(t.Slots)}
}

func (h *Handlers) leave(w http.ResponseWriter, r *http.Request, sc scope) error {
	id := r.PathValue("worker_id")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, hs, err := h.sessions.load(ctx, id, sc.token)
	if err != nil {
		return err
	}
	held := make([]apiv1.WorkerLease, 0, len(hs))
	for tid, hd := range hs {
		held = append(held, apiv1.WorkerLease{ID: tid, Lease: hd.Lease})
	}
	if err := h.cfg.Recorder.Release(ctx, held); err != nil {
		return err
	}
	if err := h.sessions.remove(ctx, id); err != nil {
		return err
	}
	h.beats.forget(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
