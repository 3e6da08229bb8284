package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// The hand-off receiver: the tasks other regions hand to this one.

// Accept is the receiving side of a hand-off: a task id is accepted at most
// once; a repeat of an id it already holds is answered "accepted" again
// (the sender lost the first answer).
func (n *Receiver) Accept(ctx context.Context, h apiv1.HandOff, known func(pool string) bool) (apiv1.HandOffResponse, error) {
	res, err := n.AcceptMany(ctx, []apiv1.HandOff{h}, known)
	if err != nil {
		return apiv1.HandOffResponse{}, err
	}
	var rf *Refusal
	switch r := res[0]; {
	case errors.As(r.Err, &rf):
		return apiv1.HandOffResponse{Accepted: false, Reason: rf.Reason, Field: rf.Field}, nil
	case r.Err != nil:
		return apiv1.HandOffResponse{}, r.Err
	}
	return apiv1.HandOffResponse{Accepted: true, State: string(res[0].State), Canceled: res[0].Canceled}, nil
}

// Accepted is the receiver's outcome of one hand-off.
type Accepted struct {
	State     task.State
	Duplicate bool  // the id was held already (an earlier attempt landed)
	Canceled  bool  // the hand-off's Cancel was carried out
	Err       error // not accepted: the spec's *task.FieldError, task.ErrBadID, or a *Refusal
}

// Refusal is a well-formed hand-off the receiver will not take: no such
// pool here, the pool is at its admission limit, or its store refused the id.
type Refusal struct {
	Field  string // "pool", or "" when not one field's fault
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// AcceptMany is Accept for many hand-offs: each is judged on its own, and
// all the acceptable ones are stored in one store call. The error is for
// store failures (nothing is decided then; ids stored before the failure
// are answered "accepted" when the sender retries).
func (n *Receiver) AcceptMany(ctx context.Context, hs []apiv1.HandOff, known func(pool string) bool) ([]Accepted, error) {
	out := make([]Accepted, len(hs))
	var tasks []queue.NewTask
	var idx []int
	now := n.cfg.Now()
	for i, h := range hs {
		sp, err := task.DecodeSpec(h.Spec)
		if err == nil {
			err = sp.Normalize(n.cfg.Defaults, now)
		}
		if err == nil {
			_, err = task.ParseID(h.ID)
		}
		if err == nil {
			err = checkHistory(h, now)
		}
		if err == nil && !known(h.Pool) {
			err = &Refusal{Field: "pool", Reason: "no pool " + h.Pool + " in " + n.cfg.Region}
		}
		if err == nil && n.cell != nil && !n.cell.Admits(h.Pool, sp.Tenant) {
			err = &Refusal{Field: "pool", Reason: "pool " + h.Pool + " in " + n.cfg.Region + " is other tenants' own (pools[].tenants)"}
		}
		if err == nil && h.From != "" && (h.From == n.cfg.Region || !slices.Contains(n.cfg.Regions, h.From)) {
			err = &Refusal{Field: "from", Reason: "not another region of the federation: " + h.From}
		}
		if err == nil && n.cfg.MemoryAdmit != nil {
			// Not a Refusal: the reserve's 429 or 503, which the sender
			// takes as "try again later" and keeps the task.
			if err = n.cfg.MemoryAdmit(ctx, sp.Tenant, len(sp.Payload)); err != nil {
				n.metrics.Rejected.WithLabelValues(n.cfg.Region, "memory_reserve").Inc()
			}
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		// Returning: a task this region handed off earlier may come back
		// (a drain over there); it replaces its forwarding record here.
		// Admission is the receiving pool's real fill, as for a local
		// submit: the sender placed on figures that may be seconds old.
		// Held until the sender's word (HeldLoop, Commit): the sender's
		// record decides whether it runs here.
		tasks = append(tasks, queue.NewTask{ID: h.ID, Spec: sp, Pool: h.Pool, Returning: true, History: historyOf(h),
			AdmitMax: n.picker.AdmitMax(h.Pool, sp.Critical), HeldFrom: h.From, BacklogMax: n.backlogMax(sp), BacklogBytesMax: n.backlogBytesMax(sp),
			Budget: budgetHold(h.Budget)})
		idx = append(idx, i)
	}
	if len(tasks) == 0 {
		return out, nil
	}
	res, err := n.store.Submitter().Submit(ctx, tasks...)
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		r := res[k]
		switch {
		case r.Err == nil:
			out[i].State = r.State
		case errors.Is(r.Err, task.ErrExists):
			out[i].State, out[i].Duplicate = r.State, true
		case errors.Is(r.Err, queue.ErrPoolFull):
			// A definite refusal (422): the sender places the task again.
			out[i].Err = &Refusal{Field: "pool", Reason: fmt.Sprintf("pool %s in %s is at its admission limit (%d READY: queue capacity × spill watermark)",
				tasks[k].Pool, n.cfg.Region, tasks[k].AdmitMax)}
		case errors.Is(r.Err, queue.ErrBacklogFull):
			// Counted against the tenant's backlog here like its submits:
			// a definite refusal, the sender places it again elsewhere or
			// keeps it.
			out[i].Err = &Refusal{Field: "max_backlog", Reason: fmt.Sprintf("tenant %s has %d unfinished tasks in %s, its max_backlog",
				tasks[k].Spec.Tenant, tasks[k].BacklogMax, n.cfg.Region)}
			n.metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		case errors.Is(r.Err, queue.ErrBacklogBytesFull):
			out[i].Err = &Refusal{Field: "max_backlog_bytes", Reason: fmt.Sprintf("tenant %s's unfinished tasks in %s hold up to its max_backlog_bytes (%d): this payload does not fit",
				tasks[k].Spec.Tenant, n.cfg.Region, tasks[k].BacklogBytesMax)}
			n.metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		default:
			out[i].Err = &Refusal{Reason: r.Err.Error()}
		}
		if out[i].Err == nil {
			n.traceReceived(ctx, now, &hs[i], tasks[k].Spec, out[i].State, out[i].Duplicate)
		}
		// A cancel requested at home while the hand-off was in flight: carry
		// it out here, also on a repeat (the first attempt may have stored
		// the task and not cancelled it). Already ended counts as done.
		if hs[i].Cancel && out[i].Err == nil {
			st, err := n.store.Tasks().Cancel(ctx, hs[i].ID, task.ReasonCanceledByUser, "handoff")
			var te *task.TransitionError
			switch {
			case err == nil:
				out[i].State, out[i].Canceled = st, true
			case errors.As(err, &te):
				out[i].Canceled = true
			default:
				return nil, err
			}
		}
	}
	return out, nil
}

// historyOf is what a hand-off brings of the task's past (nil from a
// sender that sends none).
func historyOf(h apiv1.HandOff) *queue.History {
	if h.CreatedAt == nil {
		return nil
	}
	return &queue.History{CreatedAt: *h.CreatedAt, Attempts: h.Attempts, PreemptCount: h.PreemptCount,
		LastError: h.LastError, Trail: h.Trail}
}

// maxCarriedAttempts bounds the attempts a hand-off may claim (max_retries
// is at most 100; preemptions and replays add a few).
const maxCarriedAttempts = 1000

// checkHistory refuses a history no sender of ours would write.
func checkHistory(h apiv1.HandOff, now time.Time) error {
	switch {
	case h.Attempts < 0 || h.Attempts > maxCarriedAttempts:
		return &Refusal{Field: "attempts", Reason: fmt.Sprintf("must be between 0 and %d", maxCarriedAttempts)}
	case h.PreemptCount < 0 || h.PreemptCount > maxCarriedAttempts:
		return &Refusal{Field: "preempt_count", Reason: fmt.Sprintf("must be between 0 and %d", maxCarriedAttempts)}
	case h.CreatedAt != nil && (h.CreatedAt.Year() < 2000 || h.CreatedAt.After(now.Add(time.Hour))):
		return &Refusal{Field: "created_at", Reason: "out of range"}
	case len(h.Trail) > queue.MaxCarriedTrail:
		return &Refusal{Field: "trail", Reason: fmt.Sprintf("more than %d steps", queue.MaxCarriedTrail)}
	case len(h.LastError) > 4*task.MaxErrorLen:
		return &Refusal{Field: "last_error", Reason: "too long"}
	}
	return nil
}

// budgetHold is a hand-off's budget reservation when it has the form the
// ledgers read ("<month> <usd>"), else "" (a sender's is trusted no
// further: a malformed one is dropped, not stored).
func budgetHold(s string) string {
	month, usd, ok := strings.Cut(s, " ")
	if !ok || len(month) != 7 {
		return ""
	}
	if _, err := time.Parse("2006-01", month); err != nil {
		return ""
	}
	if v, err := strconv.ParseFloat(usd, 64); err != nil || v < 0 || v > 1e9 {
		return ""
	}
	return s
}
