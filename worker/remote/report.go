package remote

import (
	"context"
	"errors"
	"github.com/ax-sched/ax/apiv1"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// maxReportOutcomes bounds the outcomes of one report; more wait for
	// the next, sent as soon as this one is answered.
	maxReportOutcomes = 512
	// progressDelay is how long progress alone waits for company: many
	// handlers' progress goes in one report, at most this late.
	progressDelay = 100 * time.Millisecond
	// reportTimeout bounds one report, retries included.
	reportTimeout = 10 * time.Second
)

// reporter is the Source's one report loop: every outcome, heartbeat and
// progress queued while a report is in flight goes in the next one, sent
// as soon as the last is answered. Its goroutine is started by Open and
// stopped by Close.
type reporter struct {
	s    *Source
	kick chan struct{} // capacity 1

	mu       sync.Mutex
	calls    []*call
	beats    []*beat
	prog     map[string]apiv1.WorkerProgress
	progTime bool // a progress timer is armed
}

// call is one batch of outcomes waiting for its answer.
type call struct {
	items []apiv1.WorkerOutcome
	errs  []error
	err   error
	done  chan struct{}
}

// beat is one Heartbeat waiting for its report's answer.
type beat struct {
	held []apiv1.WorkerLease
	err  error
	done chan struct{}
}

func newReporter(s *Source) *reporter {
	return &reporter{s: s, kick: make(chan struct{}, 1), prog: map[string]apiv1.WorkerProgress{}}
}

// start runs the loop until the returned stop is called; stop flushes what
// is queued, then waits for the loop to exit.
func (r *reporter) start(ctx context.Context) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-r.kick:
			case <-quit:
				for r.pending() {
					r.flush(ctx)
				}
				return
			}
			r.flush(ctx)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

func (r *reporter) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reporter) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)+len(r.beats)+len(r.prog) > 0
}

// outcomes queues items and waits for their answer: errs[i] is nil when
// item i was recorded, a *RefusedError when the server refused it.
func (r *reporter) outcomes(ctx context.Context, items []apiv1.WorkerOutcome) ([]error, error) {
	c := &call{items: items, done: make(chan struct{})}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	r.poke()
	select {
	case <-c.done:
		return c.errs, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// beat sends held with the next report and waits for its answer.
func (r *reporter) beat(ctx context.Context, held []apiv1.WorkerLease) error {
	b := &beat{held: held, done: make(chan struct{})}
	r.mu.Lock()
	r.beats = append(r.beats, b)
	r.mu.Unlock()
	r.poke()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *reporter) progress(p apiv1.WorkerProgress) {
	r.mu.Lock()
	r.prog[p.ID] = p
	arm := !r.progTime
	r.progTime = true
	r.mu.Unlock()
	if arm {
		time.AfterFunc(progressDelay, r.poke)
	}
}

// flush sends one report of what is queued and hands out its answer.
func (r *reporter) flush(ctx context.Context) {
	r.mu.Lock()
	var calls []*call
	n := 0
	for len(r.calls) > 0 && (n == 0 || n+len(r.calls[0].items) <= maxReportOutcomes) {
		n += len(r.calls[0].items)
		calls = append(calls, r.calls[0])
		r.calls = r.calls[1:]
	}
	beats := r.beats
	r.beats = nil
	prog := make([]apiv1.WorkerProgress, 0, len(r.prog))
	for _, p := range r.prog {
		prog = append(prog, p)
	}
	clear(r.prog)
	r.progTime = false
	more := len(r.calls) > 0
	r.mu.Unlock()
	if more {
		r.poke()
	}
	if len(calls)+len(beats)+len(prog) == 0 {
		return
	}
	outs := make([]string, 0, n)
	for _, c := range calls {
		for _, it := range c.items {
			outs = append(outs, it.ID)
		}
	}
	body := apiv1.WorkerReport{Progress: prog, Outcomes: make([]apiv1.WorkerOutcome, 0, n), Claim: r.s.reportClaim(outs)}
	if len(beats) > 0 {
		body.Held = beats[len(beats)-1].held // the newest knows best
		if body.Held == nil {
			body.Held = []apiv1.WorkerLease{}
		}
	}
	owner := make([]*call, 0, n) // owner[i] is the call of body.Outcomes[i]
	for _, c := range calls {
		c.errs = make([]error, len(c.items))
		body.Outcomes = append(body.Outcomes, c.items...)
		for range c.items {
			owner = append(owner, c)
		}
	}
	ans, err := r.send(ctx, &body, owner)
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
	for _, b := range beats {
		b.err = err
		close(b.done)
	}
	if err == nil {
		r.s.noteStops(ans.Stop)
	}
}

// send sends body; a 4xx naming one item (outcomes[i], held[i],
// progress[i]) refuses that item and sends the rest again. On success it
// fills the callers' per-item errors.
func (r *reporter) send(ctx context.Context, body *apiv1.WorkerReport, owner []*call) (apiv1.WorkerReportResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	index := make([]int, len(owner)) // index[i]: position of body.Outcomes[i] in its call
	seen := map[*call]int{}
	for i, c := range owner {
		index[i] = seen[c]
		seen[c]++
	}
	sent := time.Now()
	for {
		var ans apiv1.WorkerReportResponse
		err := r.s.call(ctx, "report", body, &ans)
		if err == nil {
			// Before the outcomes settle: the claim they wake finds the
			// report's tasks waiting instead of asking the server.
			r.s.claimedEarly(ans.Tasks, sent)
			r.answer(body.Outcomes, owner, index, ans)
			return ans, nil
		}
		var api *Error
		if !errors.As(err, &api) || api.Status == http.StatusNotFound {
			return ans, err
		}
		list, i, ok := itemOf(api.Field)
		switch {
		case ok && list == "outcomes" && i < len(body.Outcomes):
			it := body.Outcomes[i]
			owner[i].errs[index[i]] = &RefusedError{ID: it.ID, Code: api.Code, Message: api.Message}
			r.s.settled(it.ID)
			body.Outcomes = append(body.Outcomes[:i:i], body.Outcomes[i+1:]...)
			owner = append(owner[:i:i], owner[i+1:]...)
			index = append(index[:i:i], index[i+1:]...)
		case ok && list == "held" && i < len(body.Held):
			body.Held = append(body.Held[:i:i], body.Held[i+1:]...)
		case ok && list == "progress" && i < len(body.Progress):
			body.Progress = append(body.Progress[:i:i], body.Progress[i+1:]...)
		case strings.HasPrefix(api.Field, "claim.") && body.Claim != nil:
			body.Claim = nil
		default:
			// Not one item's fault: every outcome is refused as it is.
			for k, it := range body.Outcomes {
				owner[k].errs[index[k]] = &RefusedError{ID: it.ID, Code: api.Code, Message: api.Message}
			}
			return ans, nil
		}
		r.s.log.Warn("report item refused; sending the rest", "field", api.Field, "code", api.Code, "err", api.Message)
	}
}

// answer hands each outcome its answer (in order; by id when the answer
// does not list them all).
func (r *reporter) answer(items []apiv1.WorkerOutcome, owner []*call, index []int, ans apiv1.WorkerReportResponse) {
	byID := len(ans.Outcomes) != len(items)
	var acks map[string]apiv1.WorkerOutcomeResult
	if byID {
		acks = make(map[string]apiv1.WorkerOutcomeResult, len(ans.Outcomes))
		for _, a := range ans.Outcomes {
			acks[a.ID] = a
		}
	}
	for i, it := range items {
		a := apiv1.WorkerOutcomeResult{ID: it.ID, Code: "no_answer", Message: "the report's answer does not name it"}
		if byID {
			if got, ok := acks[it.ID]; ok {
				a = got
			}
		} else {
			a = ans.Outcomes[i]
		}
		if !a.OK {
			owner[i].errs[index[i]] = &RefusedError{ID: it.ID, Code: a.Code, Message: a.Message}
		}
		r.s.settled(it.ID)
	}
}

// itemOf reads "outcomes[2].result" as ("outcomes", 2).
func itemOf(field string) (string, int, bool) {
	open := strings.IndexByte(field, '[')
	end := strings.IndexByte(field, ']')
	if open <= 0 || end < open {
		return "", 0, false
	}
	i, err := strconv.Atoi(field[open+1 : end])
	if err != nil || i < 0 {
		return "", 0, false
	}
	return field[:open], i, true
}
