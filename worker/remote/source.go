package remote

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/apiv1"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Defaults of Options and of the registration's answer until it came.
const (
	DefaultClaimWait = time.Second
	DefaultLease     = 30 * time.Second
	// DefaultClaimBatch is a remote worker's claim size unless its
	// worker.Options.ClaimBatch says otherwise: a claim is a round trip
	// through a server, so it takes more than a direct worker's.
	DefaultClaimBatch = 128
)

// Options configure a Source.
type Options struct {
	// Labels are sent with the registration (zone, GPU model…).
	Labels map[string]string
	// ClaimWait is how long one claim waits on the server for a task when
	// none is ready (default 1s, cut to the server's max_wait_ms). A task
	// submitted meanwhile is answered at once; the wait bounds an idle
	// worker's requests and how long its shutdown waits for the last claim.
	ClaimWait time.Duration
	// HTTPClient sends the requests (default: keep-alive connections, up
	// to 64 per server).
	HTTPClient *http.Client
	// Logger receives retries and re-registrations (default slog.Default()).
	Logger *slog.Logger
}

// Source is a worker.Source over the worker protocol. Create it with New
// and give it to worker.New; the worker opens it when it runs and closes
// it (DELETE) when it stops.
type Source struct {
	c    *conn
	opts Options
	log  *slog.Logger
	rep  *reporter

	mu       sync.Mutex
	opened   bool
	reg      apiv1.WorkerRegister
	id       string                 // worker id of the current registration; "" none yet
	info     apiv1.WorkerRegistered // the registration's answer
	leases   map[string]string      // claimed, outcome not yet answered
	stopped  map[string]bool        // of leases, those a report's answer stopped (the server no longer counts them)
	milli    map[string]int         // of leases, the room each holds in milli-slots when less than a slot
	smallest int                    // the least room a task handed out took (milli-slots; 0: none yet, a whole slot)
	freed    chan struct{}          // capacity 1: an outcome was answered or a task stopped
	stops    []queue.Stop           // from reports' answers, for the next Heartbeat
	want     int                    // a ClaimTasks waits for a free slot and wants this many; 0: none waits
	early    []*task.Task           // claimed by a report, not yet handed to the worker (their leases are in leases)
	regMu    sync.Mutex             // one registration at a time
	closeRep func()
}

// New returns a Source sending to urls (servers of one region, tried in
// turn) with the worker token.
func New(urls []string, token string, opts Options) (*Source, error) {
	if len(urls) == 0 {
		return nil, errors.New("remote: no API URL")
	}
	clean := make([]string, 0, len(urls))
	for _, u := range urls {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("remote: API URL %q: want http(s)://host[:port]", u)
		}
		clean = append(clean, u)
	}
	if token == "" {
		return nil, errors.New("remote: no worker token")
	}
	if opts.ClaimWait <= 0 {
		opts.ClaimWait = DefaultClaimWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 64
		tr.DialContext = (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		hc = &http.Client{Transport: tr}
	}
	s := &Source{opts: opts, log: opts.Logger.With("component", "remote-worker"), leases: map[string]string{}, stopped: map[string]bool{}, milli: map[string]int{}, freed: make(chan struct{}, 1)}
	s.c = &conn{urls: clean, auth: "Bearer " + token, hc: hc, onErr: func(u string, err error, attempt int) {
		s.log.Warn("API request failed; retrying", "url", u, "err", err, "attempt", attempt)
	}}
	s.rep = newReporter(s)
	return s, nil
}

// ClaimBatch is the claim size a worker over this Source takes unless
// told otherwise (DefaultClaimBatch).
func (s *Source) ClaimBatch() int { return DefaultClaimBatch }

// Options gives the registration's lease (DefaultLease until the first
// registration answered) and region.
func (s *Source) Options() queue.Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	lease := DefaultLease
	if s.info.LeaseMS > 0 {
		lease = time.Duration(s.info.LeaseMS) * time.Millisecond
	}
	return queue.Options{Region: s.info.Region, Lease: lease}
}

// HeartbeatInterval is half the registration's heartbeat_ms, so a late
// report still comes within it (0 before the first registration).
func (s *Source) HeartbeatInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.info.HeartbeatMS) * time.Millisecond / 2
}

// Open records what the worker registers as and starts the report loop;
// the registration itself goes out with the first claim or heartbeat.
func (s *Source) Open(ctx context.Context, worker, pool string, slots int, types queue.Types) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened {
		return errors.New("remote: Source opened twice")
	}
	s.opened = true
	s.reg = apiv1.WorkerRegister{Pool: pool, Slots: slots, Labels: s.opts.Labels, Name: worker}
	if !types.All() {
		s.reg.Types = types.List()
	}
	s.closeRep = s.rep.start(context.WithoutCancel(ctx))
	return nil
}

// Close flushes the reports queued, stops the report loop and leaves:
// the server gives back at once what is still leased to the worker.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	stop, id := s.closeRep, s.id
	s.closeRep = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if id == "" {
		return nil
	}
	err := s.c.do(ctx, http.MethodDelete, "/v1/workers/"+url.PathEscape(id), nil, nil)
	var api *Error
	if errors.As(err, &api) && api.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// workerID registers once when no registration is current.
func (s *Source) workerID(ctx context.Context) (string, error) {
	s.mu.Lock()
	id, opened, reg := s.id, s.opened, s.reg
	s.mu.Unlock()
	if id != "" {
		return id, nil
	}
	if !opened {
		return "", errors.New("remote: Source not opened (worker.Run opens it)")
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	id = s.id
	s.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var info apiv1.WorkerRegistered
	if err := s.c.do(ctx, http.MethodPost, "/v1/workers", reg, &info); err != nil {
		return "", fmt.Errorf("remote: register: %w", err)
	}
	if info.WorkerID == "" {
		return "", errors.New("remote: register: the answer has no worker_id")
	}
	s.mu.Lock()
	s.id, s.info = info.WorkerID, info
	s.mu.Unlock()
	s.log.Info("registered", "worker_id", info.WorkerID, "region", info.Region, "pool", reg.Pool, "slots", reg.Slots)
	return info.WorkerID, nil
}

// forget drops registration id after the server said it does not know it;
// the next call registers again.
func (s *Source) forget(id string) {
	s.mu.Lock()
	if s.id == id {
		s.id = ""
		s.log.Warn("the server does not know this worker id (its registration expired); registering again", "worker_id", id)
	}
	s.mu.Unlock()
}

// unknownWorker reports whether err is the 404 of an unknown worker id.
func unknownWorker(err error) bool {
	var api *Error
	return errors.As(err, &api) && api.Status == http.StatusNotFound
}

// call sends one request about the current registration, registering
// again once when the server no longer knows it.
func (s *Source) call(ctx context.Context, op string, body, out any) error {
	for try := 0; ; try++ {
		id, err := s.workerID(ctx)
		if err != nil {
			return err
		}
		err = s.c.do(ctx, http.MethodPost, "/v1/workers/"+url.PathEscape(id)+"/"+op, body, out)
		if try == 0 && unknownWorker(err) {
			s.forget(id)
			continue
		}
		return err
	}
}

// ClaimTasks long-polls one claim: it answers as soon as a task was
// claimed, or empty after ClaimWait. The server counts a task as held
// until its outcome's report is answered, so a claim asks only while the
// tasks held by that count leave room in the worker's slots (milli-slots:
// a task holds its slots), and with none free it waits here for a
// report's answer (up to ClaimWait) instead of asking; the server hands
// out tasks that fit that room.
func (s *Source) ClaimTasks(ctx context.Context, req queue.ClaimRequest) (queue.Claimed, error) {
	s.mu.Lock()
	wait := s.opts.ClaimWait
	if s.info.MaxWaitMS > 0 {
		wait = min(wait, time.Duration(s.info.MaxWaitMS)*time.Millisecond)
	}
	s.mu.Unlock()
	n, early := s.claimable(ctx, req.N, wait)
	if len(early) > 0 {
		return queue.Claimed{Tasks: early}, nil
	}
	if n == 0 {
		return queue.Claimed{}, ctx.Err()
	}
	sent := time.Now()
	var ans apiv1.WorkerClaimResponse
	// Every retry of this claim (conn.do resends the same body) names it,
	// so a retry after a lost answer gets the tasks the lost one held.
	body := apiv1.WorkerClaimRequest{Max: max(n, 1), WaitMS: int(wait.Milliseconds()), ClaimID: newClaimID()}
	if err := s.call(ctx, "claim", body, &ans); err != nil {
		return queue.Claimed{}, fmt.Errorf("remote: claim: %w", err)
	}
	s.mu.Lock()
	out := s.admit(ans.Tasks, sent)
	s.mu.Unlock()
	return queue.Claimed{Tasks: out}, nil
}

// admit records the leases of tasks a claim answered (sent at sent) and
// returns them as the worker runs them; mu held.
func (s *Source) admit(ts []apiv1.WorkerTask, sent time.Time) []*task.Task {
	out := make([]*task.Task, 0, len(ts))
	for _, t := range ts {
		if s.leases[t.ID] == t.Lease {
			continue // already running here
		}
		s.leases[t.ID] = t.Lease
		sl := task.Slots(t.Slots)
		if m := task.Milli(sl); m < task.MilliSlots {
			s.milli[t.ID] = m
			if s.smallest == 0 || m < s.smallest {
				s.smallest = m
			}
		} else {
			sl = 0
		}
		out = append(out, &task.Task{
			Slots: sl,
			ID:    t.ID, Type: t.Type, Payload: t.Payload, Attempts: t.Attempt, MaxRetries: t.MaxRetries,
			Priority: t.Priority, Tags: t.Tags, Tenant: t.Tenant, TraceID: t.TraceID, LeaseToken: t.Lease,
			// The worker counts the deadline from before the claim was
			// sent: it fires no later than the server's.
			Timeout: task.Duration(t.Deadline.Sub(sent)),
			State:   task.Running,
			Parents: apiv1.ParentsOf(t.Parents),
		})
	}
	return out
}

// reportClaim is the claim a report with nOut outcomes carries: while a
// ClaimTasks waits for a slot, the report asks for the slots its outcomes
// free, so their tasks come back in the report's answer instead of one
// more round trip. nil when no claim waits or no slot would be free.
func (s *Source) reportClaim(outs []string) *apiv1.WorkerReportClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want <= 0 || len(outs) == 0 || s.id == "" {
		return nil
	}
	n := min(s.want, apiv1.MaxWorkerClaim)
	if s.reg.Slots > 0 {
		n = min(n, s.fits(s.freeRoom(outs)))
	}
	if s.info.MaxClaim > 0 {
		n = min(n, s.info.MaxClaim)
	}
	if n <= 0 {
		return nil
	}
	s.want = 0 // one report asks for a waiting claim
	return &apiv1.WorkerReportClaim{Max: n, ClaimID: newClaimID()}
}

// claimedEarly keeps the tasks a report's claim took (sent at sent) for
// the next ClaimTasks and wakes it.
func (s *Source) claimedEarly(ts []apiv1.WorkerTask, sent time.Time) {
	if len(ts) == 0 {
		return
	}
	s.mu.Lock()
	s.early = append(s.early, s.admit(ts, sent)...)
	s.mu.Unlock()
	s.free()
}

// newClaimID names one claim (its retries share it).
func newClaimID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// claimable waits up to wait for a slot free by the server's count and
// returns how many of want to ask for (0: none freed in time).
func (s *Source) claimable(ctx context.Context, want int, wait time.Duration) (int, []*task.Task) {
	var timeout <-chan time.Time
	defer func() {
		s.mu.Lock()
		s.want = 0
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if len(s.early) > 0 {
			k := min(max(want, 1), len(s.early))
			early := s.early[:k:k]
			s.early = s.early[k:]
			s.mu.Unlock()
			return 0, early
		}
		n := want
		if s.info.MaxClaim > 0 {
			n = min(n, s.info.MaxClaim)
		}
		if s.reg.Slots > 0 {
			n = min(n, s.fits(s.freeRoom(nil)))
		}
		if n <= 0 {
			s.want = want
		}
		s.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-s.freed:
		case <-timeout:
			return 0, nil
		case <-ctx.Done():
			return 0, nil
		}
	}
}

// freeRoom is the room (milli-slots) the worker's slots leave beside the
// tasks the server counts as held, those of outs (outcomes about to be
// reported) taken as freed; mu held. The server cuts a claim to the same
// room: its tasks fit it together.
func (s *Source) freeRoom(outs []string) int {
	room := s.reg.Slots * task.MilliSlots
	for id := range s.leases {
		if !s.stopped[id] {
			room -= s.roomOf(id)
		}
	}
	for _, id := range outs {
		if _, ok := s.leases[id]; ok && !s.stopped[id] {
			room += s.roomOf(id)
		}
	}
	return room
}

// fits is how many tasks a claim asks for at most with room free: as many
// of the smallest the worker was handed so far (a whole slot until it
// was handed a fraction) as room holds; the server's cut makes the
// tasks fit the room together. mu held.
func (s *Source) fits(room int) int {
	if room <= 0 {
		return 0
	}
	return room / cmp.Or(s.smallest, task.MilliSlots)
}

// roomOf is the room the held task id takes (milli-slots); mu held.
func (s *Source) roomOf(id string) int {
	if m, ok := s.milli[id]; ok {
		return m
	}
	return task.MilliSlots
}

// free wakes a claim waiting for a slot.
func (s *Source) free() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// Heartbeat sends held with the next report and returns the stops every
// report answered since the last Heartbeat.
func (s *Source) Heartbeat(ctx context.Context, _, _ string, _ int, _ queue.Types, held []queue.Lease) ([]queue.Stop, error) {
	items := make([]apiv1.WorkerLease, len(held))
	for i, l := range held {
		items[i] = apiv1.WorkerLease{ID: l.ID, Lease: l.Token}
	}
	s.mu.Lock()
	for _, t := range s.early { // held too, though not running yet
		items = append(items, apiv1.WorkerLease{ID: t.ID, Lease: t.LeaseToken})
	}
	s.mu.Unlock()
	if err := s.rep.beat(ctx, items); err != nil {
		return nil, err
	}
	s.mu.Lock()
	stops := s.stops
	s.stops = nil
	s.mu.Unlock()
	return stops, nil
}

// noteStops keeps a report's stops for the next Heartbeat.
func (s *Source) noteStops(items []apiv1.WorkerStop) {
	if len(items) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range items {
		tok, ok := s.leases[it.ID]
		if !ok {
			continue
		}
		s.stops = append(s.stops, queue.Stop{Lease: queue.Lease{ID: it.ID, Token: tok}, Why: stopReason(it.Reason)})
		s.stopped[it.ID] = true
	}
	s.free()
}

func stopReason(r string) queue.StopReason {
	switch r {
	case "canceled":
		return queue.StopCanceled
	case "preempted":
		return queue.StopPreempted
	case "deadline":
		return queue.StopDeadline
	default:
		return queue.StopLost
	}
}

// settled forgets the lease of a task whose outcome was answered.
func (s *Source) settled(id string) {
	s.mu.Lock()
	delete(s.leases, id)
	delete(s.stopped, id)
	delete(s.milli, id)
	s.mu.Unlock()
	s.free()
}

// Complete reports successes. A result that is JSON goes as that value,
// any other text as a JSON string.
func (s *Source) Complete(ctx context.Context, cs ...queue.Completion) ([]error, error) {
	items := make([]apiv1.WorkerOutcome, len(cs))
	for i, c := range cs {
		items[i] = apiv1.WorkerOutcome{ID: c.ID, Lease: c.Token, Status: apiv1.OutcomeSuccess, Result: resultJSON(c.Result)}
	}
	return s.rep.outcomes(ctx, items)
}

// ResultSize is the size a result is sent as (its JSON text) and the
// registration's max_result_bytes (0 before the first registration).
func (s *Source) ResultSize(result string) (size, limit int) {
	s.mu.Lock()
	limit = s.info.MaxResultBytes
	s.mu.Unlock()
	return len(resultJSON(result)), limit
}

func resultJSON(r string) json.RawMessage {
	if r == "" {
		return nil
	}
	if json.Valid([]byte(r)) {
		return json.RawMessage(r)
	}
	b, _ := json.Marshal(r)
	return b
}

// Fail reports a failed attempt. The protocol answers no state: it returns
// the state the failure asks for (FAILED when final, PENDING for a retry).
func (s *Source) Fail(ctx context.Context, f queue.Failure) (task.State, time.Time, error) {
	o := apiv1.WorkerOutcome{ID: f.ID, Lease: f.Token, Status: apiv1.OutcomeFailure, Error: f.Error, Retry: &f.Retryable}
	if f.Reason == task.ReasonResultTooLarge {
		o.Reason = f.Reason
	}
	err := s.one(ctx, o)
	if err != nil {
		return "", time.Time{}, err
	}
	if !f.Retryable {
		return task.Failed, time.Time{}, nil
	}
	return task.Pending, time.Time{}, nil
}

// Return gives a task back without spending a retry.
func (s *Source) Return(ctx context.Context, id, token, _ string, delay time.Duration) (task.State, error) {
	if err := s.one(ctx, apiv1.WorkerOutcome{ID: id, Lease: token, Status: apiv1.OutcomeReturn, RetryAfterMS: int(delay.Milliseconds())}); err != nil {
		return "", err
	}
	if delay > 0 {
		return task.Pending, nil
	}
	return task.Ready, nil
}

// RetryAfter reports a retryable failure to run again after d.
func (s *Source) RetryAfter(ctx context.Context, id, token string, d time.Duration) (task.State, error) {
	err := s.one(ctx, apiv1.WorkerOutcome{ID: id, Lease: token, Status: apiv1.OutcomeFailure,
		Error: fmt.Sprintf("retry after %s", d), RetryAfterMS: int(max(d.Milliseconds(), 1))})
	if err != nil {
		return "", err
	}
	return task.Pending, nil
}

func (s *Source) one(ctx context.Context, it apiv1.WorkerOutcome) error {
	errs, err := s.rep.outcomes(ctx, []apiv1.WorkerOutcome{it})
	if err != nil {
		return err
	}
	return errs[0]
}

// Progress sends the handler's progress with the next report (the last
// one per task wins).
func (s *Source) Progress(id, token string, percent int, message string) {
	s.rep.progress(apiv1.WorkerProgress{ID: id, Lease: token, Percent: float64(percent), Message: message})
}

// RefusedError is the server's refusal of one outcome (its lease is lost,
// the task is not this worker's, a field is malformed): it is not recorded
// and resending it cannot change that, so it matches queue.ErrLeaseLost.
type RefusedError struct {
	ID, Code, Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("remote: outcome of %s refused: %s: %s", e.ID, e.Code, e.Message)
}

func (e *RefusedError) Unwrap() error { return queue.ErrLeaseLost }
