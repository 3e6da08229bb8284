package results

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// Config is what the result route needs.
type Config struct {
	// Task reads a task as GET /v1/tasks/{id} answers p, following it to
	// the region that holds it (another tenant's is task.ErrNotFound).
	Task func(ctx context.Context, p endpoint.Principal, id string, hops int) (*task.Task, error)
	// LongPolls caps the waits held at once on this server (default 8),
	// LongPollsPerTenant those of one tenant (default 2); beyond them a
	// wait is 429 with Retry-After.
	LongPolls, LongPollsPerTenant int
}

// Results serves the result route.
type Results struct {
	cfg   Config
	polls *endpoint.LongPolls
}

// New returns the result route's handlers.
func New(cfg Config) *Results {
	return &Results{cfg: cfg, polls: endpoint.NewLongPolls(cfg.LongPolls, cfg.LongPollsPerTenant)}
}

// Routes are the result route.
func (rs *Results) Routes() []endpoint.Route {
	return []endpoint.Route{{Pattern: "GET /v1/tasks/{id}/result", Role: endpoint.RoleSubmitter, Handle: rs.get}}
}

// The wait reads the task again after firstPoll, then less often, up to
// every maxPoll: a task that finishes within milliseconds is answered
// within them, and a long wait costs one read a second.
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = time.Second
)

func (rs *Results) get(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		return err
	}
	id, hops := r.PathValue("id"), endpoint.Hops(r)
	t, err := rs.cfg.Task(r.Context(), p, id, hops)
	if err != nil {
		return err
	}
	if !t.State.Terminal() && wait > 0 {
		release, err := rs.polls.Acquire(endpoint.Poller(p))
		if err != nil {
			return err
		}
		defer release()
		// The server's read and write timeouts would end the wait early:
		// this request gets its wait on top of them.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
		if t, err = rs.waitFor(r.Context(), p, id, hops, t, wait); err != nil {
			return err
		}
	}
	status := http.StatusOK
	if !t.State.Terminal() {
		status = http.StatusAccepted
	}
	endpoint.WriteJSON(w, status, resultOf(t))
	return nil
}

// waitFor reads the task until it is terminal or wait has passed, and
// returns the last read.
func (rs *Results) waitFor(ctx context.Context, p endpoint.Principal, id string, hops int, t *task.Task, wait time.Duration) (*task.Task, error) {
	end := time.Now().Add(wait)
	pause := firstPoll
	timer := time.NewTimer(0)
	defer timer.Stop()
	for !t.State.Terminal() {
		left := time.Until(end)
		if left <= 0 {
			return t, nil
		}
		timer.Reset(min(pause, left))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
		pause = min(pause*3/2, maxPoll)
		next, err := rs.cfg.Task(ctx, p, id, hops)
		if err != nil {
			return nil, err
		}
		t = next
	}
	return t, nil
}

// resultOf is the answer for t.
func resultOf(t *task.Task) apiv1.TaskResult {
	res := apiv1.TaskResult{ID: t.ID, State: t.State, Done: t.State.Terminal(), Reason: t.Reason, Attempts: t.Attempts,
		FinishedAt: t.FinishedAt, ResultExpiresAt: t.ResultExpiresAt, Progress: t.Progress}
	switch {
	case t.State != task.Success:
		if t.State.Terminal() {
			res.Error = t.LastError
		}
	case t.Result == "":
	case json.Valid([]byte(t.Result)):
		res.Result = json.RawMessage(t.Result)
	case utf8.ValidString(t.Result):
		res.Result, _ = json.Marshal(t.Result)
	default:
		res.ResultBase64 = []byte(t.Result)
	}
	return res
}

// parseWait reads wait= (a duration, 0 to apiv1.MaxResultWait; absent:
// no wait).
func parseWait(q url.Values) (time.Duration, error) {
	v := q.Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > apiv1.MaxResultWait {
		return 0, &task.FieldError{Field: "wait", Msg: "a duration from 0s to " + apiv1.MaxResultWait.String()}
	}
	return d, nil
}
