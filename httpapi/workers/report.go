package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// maxReportItems bounds each list of a report (a worker holds at most
// apiv1.MaxWorkerSlots tasks).
const maxReportItems = apiv1.MaxWorkerSlots

// maxRetryAfter bounds an outcome's retry_after_ms.
const maxRetryAfter = 24 * time.Hour

func (h *Handlers) report(w http.ResponseWriter, r *http.Request, sc scope) error {
	var req apiv1.WorkerReport
	limit := int64(maxReportItems)*int64(h.cfg.Limits.MaxResultBytes) + 4<<20
	if err := endpoint.Decode(w, r, limit, &req); err != nil {
		return err
	}
	results, err := h.checkReport(&req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*callTimeout)
	defer cancel()
	se, hs, err := h.sessions.load(ctx, r.PathValue("worker_id"), sc.token)
	if err != nil {
		return err
	}
	mine, err := h.sortItems(ctx, &req, hs, sc)
	if err != nil {
		return err
	}
	// From here on the report is applied: no 4xx any more.
	rp := &reportRun{h: h, se: se, sc: sc, hs: hs, mine: mine, add: map[string]held{},
		resp: apiv1.WorkerReportResponse{Stop: []apiv1.WorkerStop{}, Outcomes: make([]apiv1.WorkerOutcomeResult, len(req.Outcomes))}}
	if err := rp.outcomes(ctx, req.Outcomes, results); err != nil {
		return err
	}
	if err := rp.progress(ctx, req.Progress); err != nil {
		return err
	}
	if err := rp.heartbeat(ctx, req.Held); err != nil {
		return err
	}
	if err := h.sessions.update(ctx, se.ID, rp.add, rp.drop); err != nil {
		return err
	}
	if req.Claim != nil {
		tasks, err := rp.claim(ctx, *req.Claim)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			rp.resp.Tasks = append(rp.resp.Tasks, wireTask(t))
		}
	}
	endpoint.WriteJSON(w, http.StatusOK, rp.resp)
	return nil
}

func field(list string, i int, name string) string {
	return list + "[" + strconv.Itoa(i) + "]." + name
}

func invalid(f, msg string) error {
	return &endpoint.Error{Code: apiv1.CodeInvalid, Field: f, Msg: msg}
}

// checkReport checks every item of a report before anything is applied,
// and returns each success's result as it is stored (its compact JSON
// text, "" for none).
func (h *Handlers) checkReport(req *apiv1.WorkerReport) ([]string, error) {
	for list, n := range map[string]int{"held": len(req.Held), "progress": len(req.Progress), "outcomes": len(req.Outcomes)} {
		if n > maxReportItems {
			return nil, invalid(list, "at most "+strconv.Itoa(maxReportItems)+" items")
		}
	}
	for i, l := range req.Held {
		if err := checkLease("held", i, l.ID, l.Lease); err != nil {
			return nil, err
		}
	}
	for i, p := range req.Progress {
		if err := checkLease("progress", i, p.ID, p.Lease); err != nil {
			return nil, err
		}
		if p.Percent < 0 || p.Percent > 100 {
			return nil, invalid(field("progress", i, "percent"), "must be 0..100")
		}
		if len(p.Message) > apiv1.MaxProgressMessage {
			return nil, invalid(field("progress", i, "message"), "at most "+strconv.Itoa(apiv1.MaxProgressMessage)+" bytes")
		}
	}
	if c := req.Claim; c != nil {
		switch {
		case c.Max < 1 || c.Max > apiv1.MaxWorkerClaim:
			return nil, invalid("claim.max", "must be 1.."+strconv.Itoa(apiv1.MaxWorkerClaim))
		case len(c.ClaimID) > apiv1.MaxClaimID:
			return nil, invalid("claim.claim_id", "at most "+strconv.Itoa(apiv1.MaxClaimID)+" bytes")
		}
	}
	results := make([]string, len(req.Outcomes))
	seen := map[string]int{}
	for i, o := range req.Outcomes {
		if err := checkLease("outcomes", i, o.ID, o.Lease); err != nil {
			return nil, err
		}
		if j, dup := seen[o.ID]; dup {
			return nil, invalid(field("outcomes", i, "id"), fmt.Sprintf("the same task as outcomes[%d]", j))
		}
		seen[o.ID] = i
		res, err := h.checkOutcome(i, o)
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	return results, nil
}

func checkLease(list string, i int, id, lease string) error {
	switch {
	case id == "":
		return invalid(field(list, i, "id"), "required")
	case lease == "":
		return invalid(field(list, i, "lease"), "required")
	}
	return nil
}

func (h *Handlers) checkOutcome(i int, o apiv1.WorkerOutcome) (string, error) {
	switch o.Status {
	case apiv1.OutcomeSuccess, apiv1.OutcomeFailure, apiv1.OutcomeReturn:
	default:
		return "", invalid(field("outcomes", i, "status"), "must be success, failure or return, got "+strconv.Quote(o.Status))
	}
	if o.Reason != "" && (o.Reason != task.ReasonResultTooLarge || o.Status != apiv1.OutcomeFailure) {
		return "", invalid(field("outcomes", i, "reason"), "only a failure may name a reason, and only "+task.ReasonResultTooLarge)
	}
	if o.RetryAfterMS < 0 || time.Duration(o.RetryAfterMS)*time.Millisecond > maxRetryAfter {
		return "", invalid(field("outcomes", i, "retry_after_ms"), "must be 0.."+strconv.FormatInt(maxRetryAfter.Milliseconds(), 10))
	}
	raw := bytes.TrimSpace(o.Result)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if o.Status != apiv1.OutcomeSuccess {
		return "", invalid(field("outcomes", i, "result"), "only a success carries a result")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", invalid(field("outcomes", i, "result"), "not JSON: "+err.Error())
	}
	if b.Len() > h.cfg.Limits.MaxResultBytes {
		return "", &endpoint.Error{Code: apiv1.CodeResultTooLarge, Field: field("outcomes", i, "result"),
			Msg: fmt.Sprintf("the result is %d bytes of JSON, over this region's results.max_bytes (%d); nothing of the report was applied: report a failure with reason RESULT_TOO_LARGE instead",
				b.Len(), h.cfg.Limits.MaxResultBytes)}
	}
	return b.String(), nil
}

// sortItems decides which items of the report name tasks the worker holds
// under the lease given (mine); the others are answered as lost leases —
// unless they name a task that does not exist (404) or one of a tenant or
// pool outside the token (403): then the whole report is refused.
func (h *Handlers) sortItems(ctx context.Context, req *apiv1.WorkerReport, hs map[string]held, sc scope) (map[string]bool, error) {
	mine := map[string]bool{}
	check := func(list string, i int, id, lease string) error {
		if hd, ok := hs[id]; ok {
			mine[id+"\x00"+lease] = hd.Lease == lease
			return nil
		}
		t, err := h.cfg.Reader.Get(ctx, id)
		switch {
		case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrBadID):
			return &endpoint.Error{Code: apiv1.CodeNotFound, Field: field(list, i, "id"), Msg: "no such task"}
		case err != nil:
			return err
		case !sc.tenant(t.Tenant) || !sc.pool(t.Pool):
			return &endpoint.Error{Code: apiv1.CodeForbidden, Field: field(list, i, "id"),
				Msg: "the task is of a tenant or pool this token does not serve"}
		}
		mine[id+"\x00"+lease] = false
		return nil
	}
	for i, o := range req.Outcomes {
		if err := check("outcomes", i, o.ID, o.Lease); err != nil {
			return nil, err
		}
	}
	for i, p := range req.Progress {
		if err := check("progress", i, p.ID, p.Lease); err != nil {
			return nil, err
		}
	}
	for i, l := range req.Held {
		if err := check("held", i, l.ID, l.Lease); err != nil {
			return nil, err
		}
	}
	return mine, nil
}

// reportRun applies one checked report.
type reportRun struct {
	h    *Handlers
	se   session
	sc   scope
	hs   map[string]held
	mine map[string]bool
	done []string // tasks whose outcome was reported
	add  map[string]held
	drop []string
	resp apiv1.WorkerReportResponse
}

func (rp *reportRun) holds(id, lease string) bool { return rp.mine[id+"\x00"+lease] }

var errLost = &apiv1.WorkerOutcomeResult{Code: "lease_lost", Message: "the task is no longer this worker's (its lease expired, or it was stopped)"}

// outcomes records the report's outcomes, each answered in order.
func (rp *reportRun) outcomes(ctx context.Context, os []apiv1.WorkerOutcome, results []string) error {
	var mine []apiv1.WorkerOutcome
	var mineRes []string
	var at []int
	for i, o := range os {
		rp.resp.Outcomes[i] = apiv1.WorkerOutcomeResult{ID: o.ID, OK: true}
		rp.done = append(rp.done, o.ID)
		if hd, ok := rp.hs[o.ID]; ok && hd.Lease == o.Lease {
			rp.drop = append(rp.drop, o.ID)
		}
		if !rp.holds(o.ID, o.Lease) {
			rp.lost(i, o)
			continue
		}
		mine, mineRes, at = append(mine, o), append(mineRes, results[i]), append(at, i)
	}
	if len(mine) == 0 {
		return nil
	}
	lost, err := rp.h.cfg.Recorder.Record(ctx, mine, mineRes, rp.h.cfg.Limits.MaxResultBytes)
	if err != nil {
		return err
	}
	for k, i := range at {
		if lost[k] {
			rp.lost(i, os[i])
			continue
		}
		rp.h.metrics.reports.WithLabelValues(rp.se.Pool, os[i].Status).Inc()
	}
	return nil
}

func (rp *reportRun) lost(i int, o apiv1.WorkerOutcome) {
	e := *errLost
	e.ID = o.ID
	rp.resp.Outcomes[i] = e
	rp.h.metrics.reports.WithLabelValues(rp.se.Pool, "lease_lost").Inc()
}

// progress records the progress of held tasks; a lost lease is a stop.
func (rp *reportRun) progress(ctx context.Context, ps []apiv1.WorkerProgress) error {
	now := time.Now().UTC()
	for _, p := range ps {
		if slices.Contains(rp.done, p.ID) || !rp.holds(p.ID, p.Lease) {
			continue
		}
		err := rp.h.cfg.Recorder.Progress(ctx, p.ID, p.Lease, task.Progress{Percent: p.Percent, Message: p.Message, UpdatedAt: now})
		if err != nil {
			return err
		}
	}
	return nil
}

// heartbeat extends the leases of the held tasks and registers the worker
// alive; the tasks the store says to stop are ended and named in the
// answer. Tasks the worker holds here but did not list for a whole lease
// are forgotten (the reaper has taken them).
func (rp *reportRun) heartbeat(ctx context.Context, ls []apiv1.WorkerLease) error {
	var leases []apiv1.WorkerLease
	listed := map[string]bool{}
	for _, l := range ls {
		if slices.Contains(rp.done, l.ID) {
			continue
		}
		listed[l.ID] = true
		if !rp.holds(l.ID, l.Lease) {
			rp.stop(apiv1.WorkerStop{ID: l.ID, Reason: apiv1.StopLeaseLost})
			continue
		}
		leases = append(leases, l)
		rp.add[l.ID] = held{Lease: l.Lease, Milli: rp.hs[l.ID].Milli}
	}
	lease := rp.h.cfg.Claimer.Lease()
	for id, hd := range rp.hs {
		if !listed[id] && !slices.Contains(rp.done, id) && time.Since(hd.Seen) > lease {
			rp.drop = append(rp.drop, id)
		}
	}
	if len(leases) == 0 && !rp.h.beats.due(rp.se.ID, rp.h.cfg.Heartbeat/2) {
		return nil // no lease to extend, and recorded alive just now
	}
	w, _ := rp.se.served(rp.sc)
	stops, err := rp.h.cfg.Claimer.Heartbeat(ctx, w, leases)
	if err != nil {
		return err
	}
	rp.h.beats.mark(rp.se.ID)
	for _, s := range stops {
		delete(rp.add, s.ID)
		rp.drop = append(rp.drop, s.ID)
		rp.stop(s)
	}
	return nil
}

// claim runs the report's claim once the report is applied: a resent
// report's claim (its claim_id the session's last) answers what the first
// took; else up to c.Max tasks, cut to the slots free once the report's
// outcomes and stops are counted (in milli-slots: the tasks taken fit
// the room the worker's slots leave), without waiting for one.
func (rp *reportRun) claim(ctx context.Context, c apiv1.WorkerReportClaim) ([]*task.Task, error) {
	w, ok := rp.se.served(rp.sc)
	if !ok {
		return nil, nil // the claim route says why (403 worker_id)
	}
	now := maps.Clone(rp.hs)
	for _, id := range rp.drop {
		delete(now, id)
	}
	for id, h := range rp.add {
		now[id] = held{Lease: h.Lease, Seen: time.Now(), Milli: h.Milli}
	}
	if c.ClaimID != "" && c.ClaimID == rp.se.Claim.ID {
		ts, err := rp.h.again(ctx, rp.se, now)
		if err != nil || len(ts) > 0 {
			return ts, err
		}
	}
	room := rp.se.Slots*task.MilliSlots - heldRoom(now)
	if room <= 0 {
		return nil, nil
	}
	return rp.h.claimFor(ctx, w, rp.sc, c.Max, room, 0, c.ClaimID, routeReport)
}

func (rp *reportRun) stop(s apiv1.WorkerStop) { rp.resp.Stop = append(rp.resp.Stop, s) }
