package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/federation/apiv1"
	"github.com/ax-sched/ax/queue"
)

// Headers of server-to-server calls.
const (
	headerForwarded = "X-Ax-Forwarded" // hop count; a forwarded request is never routed again
)

type hopsKey struct{}

// withHops records in ctx how many servers the request being served has
// already passed through (its X-Ax-Forwarded header).
func withHops(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, hopsKey{}, n)
}

func hopsOf(ctx context.Context) int {
	n, _ := ctx.Value(hopsKey{}).(int)
	return n
}

// PeerError is a non-2xx answer of another region's server.
type PeerError struct {
	Status int
	Body   apiv1.Error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Body.Code, e.Body.Message)
}

// call sends one JSON request to a peer with the cluster token; out may be
// nil. A non-2xx answer is a *PeerError.
func (n *Node) call(ctx context.Context, base, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// One more hop than the request being served: a chain of forwards ends
	// at maxHops even when two regions each think the other holds the task.
	req.Header.Set(headerForwarded, strconv.Itoa(hopsOf(ctx)+1))
	if n.cfg.ClusterToken != "" {
		req.Header.Set("Authorization", "Bearer "+n.cfg.ClusterToken)
	}
	resp, err := n.peers.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var eb apiv1.ErrorBody
		_ = json.Unmarshal(b, &eb)
		return resp.StatusCode, &PeerError{Status: resp.StatusCode, Body: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("peer answer: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// forwardSubmit sends keyed specs to their key's home region in one batch.
func (n *Node) forwardSubmit(ctx context.Context, home string, specs []*queue.Spec, idx []int, out []Outcome) {
	api, err := n.peerAPI(home)
	if err != nil {
		for _, i := range idx {
			out[i].Err = err
		}
		return
	}
	req := apiv1.BatchRequest{}
	for _, i := range idx {
		b, _ := json.Marshal(specs[i])
		req.Tasks = append(req.Tasks, b)
	}
	var resp apiv1.BatchResponse
	n.metrics.forwarded.WithLabelValues(n.cfg.Region, home).Inc()
	if _, err := n.call(ctx, api, http.MethodPost, "/v1/tasks/batch", req, &resp); err != nil {
		for _, i := range idx {
			out[i].Err = fmt.Errorf("%w: %s: %v", ErrRegionUnavailable, home, err)
		}
		return
	}
	for k, i := range idx {
		if k >= len(resp.Results) {
			out[i].Err = fmt.Errorf("%w: short answer from %s", ErrRegionUnavailable, home)
			continue
		}
		r := resp.Results[k]
		if r.Error != nil {
			// The peer names a field by its place in the batch it got; name
			// it by the spec, as a local error does (the API adds the caller's
			// own tasks[i] prefix).
			e := *r.Error
			if f, ok := strings.CutPrefix(e.Field, fmt.Sprintf("tasks[%d]", k)); ok && (f == "" || f[0] == '.') {
				e.Field = strings.TrimPrefix(f, ".")
			}
			out[i].Err = &PeerError{Status: r.Status, Body: e}
			continue
		}
		out[i].ID, out[i].State, out[i].Region, out[i].Duplicate = r.Task.ID, r.Task.State, r.Task.Region, r.Task.Duplicate
		if r.Task.Pool != nil {
			out[i].Pool = *r.Task.Pool
		}
	}
}

// OutboxLoop hands tasks in the outbox to their target regions (a region
// leader loop). Each task goes to the same target with the same id until a
// definite answer: accepted (or already there) → HANDED_OFF; refused →
// placed again. Timeouts and 5xx retry the same target, so a lost answer
// never makes a second copy.
func (n *Node) OutboxLoop(ctx context.Context, _ queue.Fence, _ func(error)) {
	attempts := map[string]int{}
	for ctx.Err() == nil {
		tasks, err := n.store.Outbox(ctx, 100)
		if err != nil {
			n.log.Warn("outbox read", "err", err)
		}
		for _, t := range tasks {
			n.handOff(ctx, t, attempts)
		}
		wait := 200 * time.Millisecond
		if len(tasks) == 100 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (n *Node) handOff(ctx context.Context, t *queue.Task, attempts map[string]int) {
	target := t.HandOffTarget
	retry := func(why error) {
		attempts[t.ID]++
		d := min(100*time.Millisecond<<min(attempts[t.ID], 9), 30*time.Second)
		d += time.Duration(rand.Int64N(int64(d/4) + 1))
		n.metrics.handoffs.WithLabelValues(n.cfg.Region, target, "retry").Inc()
		n.log.Info("hand-off unanswered; retrying the same target", "id", t.ID, "target", target, "in", d, "err", why)
		if err := n.store.HandOffRetry(ctx, t.ID, time.Now().Add(d)); err != nil {
			n.log.Warn("outbox retry", "id", t.ID, "err", err)
		}
	}
	r, ok := n.view.Region(target)
	if !ok || r.API == "" {
		retry(fmt.Errorf("region %s not in the view", target))
		return
	}
	spec, _ := json.Marshal(queue.SpecOf(t))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	var resp apiv1.HandOffResponse
	_, err := n.call(cctx, r.API, http.MethodPost, "/v1/internal/handoff", apiv1.HandOff{ID: t.ID, Pool: t.Pool, Spec: spec}, &resp)
	cancel()
	var pe *PeerError
	switch {
	case err == nil && resp.Accepted:
		delete(attempts, t.ID)
		n.flights.landed(t.ID, time.Now())
		if err := n.store.HandOffDone(ctx, t.ID, true); err != nil {
			n.log.Warn("hand-off accepted but not recorded", "id", t.ID, "err", err)
		}
		n.metrics.handoffs.WithLabelValues(n.cfg.Region, target, "accepted").Inc()
		n.log.Info("handed off", "id", t.ID, "target", target, "pool", t.Pool, "reason", queue.ReasonHandedOff)
	case errors.As(err, &pe) && pe.Status/100 == 4 && pe.Status != http.StatusUnauthorized && pe.Status != http.StatusTooManyRequests || err == nil && !resp.Accepted:
		// A definite refusal: place the task again.
		delete(attempts, t.ID)
		n.flights.drop(t.ID)
		if err := n.store.HandOffDone(ctx, t.ID, false); err != nil {
			n.log.Warn("hand-off refusal not recorded", "id", t.ID, "err", err)
		}
		n.metrics.handoffs.WithLabelValues(n.cfg.Region, target, "refused").Inc()
		n.log.Info("hand-off refused; placing again", "id", t.ID, "target", target, "err", err)
		if n.cell != nil {
			n.cell.Wake()
		}
	default:
		retry(err)
	}
}

// Accept is the receiving side of a hand-off: a task id is accepted at most
// once; a repeat of an id it already holds is answered "accepted" again
// (the sender lost the first answer).
func (n *Node) Accept(ctx context.Context, h apiv1.HandOff, known func(pool string) bool) (apiv1.HandOffResponse, error) {
	sp, err := queue.DecodeSpec(h.Spec)
	if err != nil {
		return apiv1.HandOffResponse{}, err
	}
	if err := sp.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return apiv1.HandOffResponse{}, err
	}
	if _, err := queue.ParseID(h.ID); err != nil {
		return apiv1.HandOffResponse{}, err
	}
	if !known(h.Pool) {
		return apiv1.HandOffResponse{Accepted: false, Reason: "no pool " + h.Pool + " in " + n.cfg.Region}, nil
	}
	res, err := n.store.Submit(ctx, queue.NewTask{ID: h.ID, Spec: sp, Pool: h.Pool})
	if err != nil {
		return apiv1.HandOffResponse{}, err
	}
	if res[0].Err != nil && !errors.Is(res[0].Err, queue.ErrExists) {
		return apiv1.HandOffResponse{Accepted: false, Reason: res[0].Err.Error()}, nil
	}
	return apiv1.HandOffResponse{Accepted: true, State: string(res[0].State)}, nil
}

// forwardTarget says where a request about id must go when this server
// does not hold the task: the home region named in the id.
func (n *Node) forwardTarget(id string) (string, bool) {
	p, err := queue.ParseID(id)
	if err != nil || p.Region == n.cfg.Region {
		return "", false
	}
	return p.Region, true
}

// proxy forwards one request about a task to another region's server.
func (n *Node) proxy(ctx context.Context, regionName, method, path string, in, out any) error {
	api, err := n.peerAPI(regionName)
	if err != nil {
		return err
	}
	n.metrics.forwarded.WithLabelValues(n.cfg.Region, regionName).Inc()
	_, err = n.call(ctx, api, method, path, in, out)
	var pe *PeerError
	if err != nil && !errors.As(err, &pe) {
		// No answer at all (refused, timed out): the region is unavailable
		// (503), not an internal error of this server.
		return fmt.Errorf("%w: %s: %v", ErrRegionUnavailable, regionName, err)
	}
	return err
}

func taskPath(id, suffix string) string { return "/v1/tasks/" + url.PathEscape(id) + suffix }
