package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/handoff"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// Receiver is the receiving side of hand-offs; *federation.Node
// implements it.
type Receiver interface {
	// Accept stores one hand-off into a pool known reports as this
	// region's, or says why not (Accepted false, Reason, Field).
	Accept(ctx context.Context, h apiv1.HandOff, known func(pool string) bool) (apiv1.HandOffResponse, error)
	// AcceptMany stores a batch of hand-offs, each with its own result.
	AcceptMany(ctx context.Context, hs []apiv1.HandOff, known func(pool string) bool) ([]handoff.Accepted, error)
	// Commit releases the hand-offs from held here that the sender says
	// may run, and says how many.
	Commit(ctx context.Context, from string, ids []string) (int, error)
	// HandOffWord is this region's word, as the sender, on hand-offs
	// target holds.
	HandOffWord(ctx context.Context, target string, ids []string) ([]apiv1.HandOffStatusItem, error)
}

// Enqueuer is the home region's side of a schedule's firing;
// *federation.Node implements it.
type Enqueuer interface {
	// Region is this server's region.
	Region() string
	// EnqueueFixed stores the task of sp under id at most once.
	EnqueueFixed(ctx context.Context, id string, sp *task.Spec) (created bool, state task.State, err error)
}

// Config is what the internal endpoints are served from.
type Config struct {
	Receiver   Receiver
	Enqueuer   Enqueuer
	MaxPayload int          // bytes of one task's payload
	Pools      []string     // this region's pools (hand-offs go only into them)
	Logger     *slog.Logger // what a batch's carried commit could not apply
}

// Handlers serves the internal endpoints.
type Handlers struct{ cfg Config }

// New builds the internal endpoints of cfg.
func New(cfg Config) *Handlers { return &Handlers{cfg: cfg} }

// Routes are the internal endpoints; the router lets only the cluster
// token call them.
func (srv *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/internal/handoff", Role: endpoint.RoleAdmin, Handle: srv.handoff},
		{Pattern: "POST /v1/internal/handoff/batch", Role: endpoint.RoleAdmin, Handle: srv.handoffBatch},
		{Pattern: "POST /v1/internal/handoff/commit", Role: endpoint.RoleAdmin, Handle: srv.handoffCommit},
		{Pattern: "POST /v1/internal/handoff/status", Role: endpoint.RoleAdmin, Handle: srv.handoffStatus},
		{Pattern: "POST /v1/internal/enqueue", Role: endpoint.RoleAdmin, Handle: srv.enqueueScheduled},
	}
}

func (srv *Handlers) handoff(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	var h apiv1.HandOff
	if err := endpoint.Decode(w, r, int64(srv.cfg.MaxPayload)+(1<<20), &h); err != nil {
		return err
	}
	resp, err := srv.cfg.Receiver.Accept(r.Context(), h, srv.knownPool)
	if err != nil {
		return err
	}
	if !resp.Accepted {
		return &endpoint.Error{Code: apiv1.CodeUnplaceable, Msg: resp.Reason, Field: resp.Field}
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// knownPool reports whether pool is one of this region's (hand-off
// receivers take tasks only into their own pools).
func (srv *Handlers) knownPool(pool string) bool {
	for _, p := range srv.cfg.Pools {
		if p == pool {
			return true
		}
	}
	return false
}

// handoffBatch serves POST /v1/internal/handoff/batch (apiv1.HandOffBatch).
//
// The request's shape is checked first, for every item: JSON, known
// fields and their types, 1 to apiv1.MaxBatch items, no id twice. A fault there
// is a 400 naming the field (items[i].id, ...) and nothing is stored.
// Then each item's content (id, pool, spec) is judged on its own, as the
// single-item endpoint judges it: a faulty item is refused in its result,
// with the status and error that endpoint would give and the field named
// items[i]...; the others are accepted (or found already held), all in one
// store call. A store failure fails the whole request (5xx): the sender
// retries every item, and ids stored before the failure are answered
// "accepted" then.
func (srv *Handlers) handoffBatch(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	// Items stay raw here so that a fault in one can be named by its place.
	var req struct {
		Items  []json.RawMessage `json:"items"`
		Commit []string          `json:"commit"`
	}
	if err := endpoint.Decode(w, r, int64(apiv1.MaxBatch)*int64(srv.cfg.MaxPayload/16+4<<10)+(64<<20), &req); err != nil {
		return err
	}
	if len(req.Items) == 0 || len(req.Items) > apiv1.MaxBatch {
		return &task.FieldError{Field: "items", Msg: fmt.Sprintf("a batch holds 1 to %d hand-offs", apiv1.MaxBatch)}
	}
	hs := make([]apiv1.HandOff, len(req.Items))
	first := make(map[string]int, len(hs))
	for i, raw := range req.Items {
		if err := endpoint.DecodeStrict(raw, &hs[i]); err != nil {
			fe := err.FieldError("a JSON object {id, pool, spec} is required")
			switch err.Fault {
			case endpoint.FaultNotObject:
				fe.Msg = "must be a JSON object {id, pool, spec}"
			case endpoint.FaultSyntax, endpoint.FaultValue:
				fe.Msg = "invalid hand-off: " + err.Detail
			}
			return fe.Under(fmt.Sprintf("items[%d]", i))
		}
		if j, ok := first[hs[i].ID]; ok {
			return &task.FieldError{Field: fmt.Sprintf("items[%d].id", i), Msg: fmt.Sprintf("repeats items[%d].id", j)}
		}
		first[hs[i].ID] = i
	}
	if len(req.Commit) > apiv1.MaxBatch {
		return &task.FieldError{Field: "commit", Msg: fmt.Sprintf("at most %d ids", apiv1.MaxBatch)}
	}
	res, err := srv.cfg.Receiver.AcceptMany(r.Context(), hs, srv.knownPool)
	if err != nil {
		return err
	}
	if len(req.Commit) > 0 && hs[0].From != "" {
		// The sender's word on earlier hand-offs; one it does not get
		// here, the held loop asks for.
		if _, err := srv.cfg.Receiver.Commit(r.Context(), hs[0].From, req.Commit); err != nil {
			srv.cfg.Logger.Warn("hand-off commit carried by a batch not applied", "peer", hs[0].From, "err", err)
		}
	}
	resp := apiv1.HandOffBatchResponse{Results: make([]apiv1.HandOffItem, len(hs))}
	for i, x := range res {
		it := apiv1.HandOffItem{ID: hs[i].ID}
		if x.Err != nil {
			st, e := handOffRefusal(i, x.Err)
			it.Status, it.Error = st, &e
			resp.Refused++
		} else {
			it.Status, it.Accepted, it.State, it.Duplicate, it.Canceled = http.StatusOK, true, string(x.State), x.Duplicate, x.Canceled
			resp.Accepted++
		}
		resp.Results[i] = it
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// handoffCommit serves POST /v1/internal/handoff/commit
// (apiv1.HandOffCommit): the sender's word that hand-offs held here may run.
func (srv *Handlers) handoffCommit(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	var req apiv1.HandOffCommit
	if err := endpoint.Decode(w, r, 1<<20, &req); err != nil {
		return err
	}
	k, err := srv.cfg.Receiver.Commit(r.Context(), req.From, req.IDs)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.HandOffCommitResponse{Released: k})
	return nil
}

// handoffStatus serves POST /v1/internal/handoff/status
// (apiv1.HandOffStatus): this region's word, as the sender, on hand-offs
// the asking region holds.
func (srv *Handlers) handoffStatus(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	var req apiv1.HandOffStatus
	if err := endpoint.Decode(w, r, 1<<20, &req); err != nil {
		return err
	}
	items, err := srv.cfg.Receiver.HandOffWord(r.Context(), req.Region, req.IDs)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.HandOffStatusResponse{Results: items})
	return nil
}

// handOffRefusal is the status and error of item i of a batch that is not
// accepted: what the single-item endpoint answers, the field named by the
// item's place.
func handOffRefusal(i int, err error) (int, apiv1.Error) {
	var rf *handoff.Refusal
	switch {
	case errors.As(err, &rf): // its field is the item's (pool)
	case errors.Is(err, task.ErrBadID):
		// An id in a body that is not one is a bad argument (400), not a
		// missing task.
		err = &task.FieldError{Field: "id", Msg: err.Error()}
	default:
		err = endpoint.PrefixField("spec", err) // the spec's own faults: 400, or 413 for its payload
	}
	e := endpoint.ErrorOf(err)
	b := e.Body()
	b.Field = strings.TrimSuffix(fmt.Sprintf("items[%d].%s", i, b.Field), ".")
	return e.Status(), b
}

// enqueueScheduled is the home region's side of a firing: it accepts the
// slot's task under its derived id at most once.
func (srv *Handlers) enqueueScheduled(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	var req apiv1.ScheduleEnqueue
	if err := endpoint.Decode(w, r, int64(srv.cfg.MaxPayload)+(64<<10), &req); err != nil {
		return err
	}
	id, err := task.ParseID(req.ID)
	if err != nil {
		return &task.FieldError{Field: "id", Msg: "is not a task id"}
	}
	if id.Region != srv.cfg.Enqueuer.Region() {
		return &task.FieldError{Field: "id", Msg: fmt.Sprintf("names home region %s; this is %s", id.Region, srv.cfg.Enqueuer.Region())}
	}
	sp, err := task.DecodeSpec(req.Spec)
	if err != nil {
		return endpoint.PrefixField("spec", err)
	}
	created, st, err := srv.cfg.Enqueuer.EnqueueFixed(r.Context(), req.ID, sp)
	if err != nil {
		return endpoint.PrefixField("spec", err)
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.ScheduleEnqueueResponse{ID: req.ID, State: st, Created: created})
	return nil
}
