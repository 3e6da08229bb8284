package federation

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// The peer client: calls to other regions' servers with the cluster token
// and a hop count, forwarded reads and actions (Proxy), keyed submits sent
// to their key's home region.

type hopsKey struct{}

// WithHops records in ctx how many servers the request being served has
// already passed through (its X-Ax-Forwarded header): calls to peers made
// while serving it carry one more.
func WithHops(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, hopsKey{}, n)
}

// HopsOf is the hop count WithHops recorded in ctx (0 when none).
func HopsOf(ctx context.Context) int { return hopsOf(ctx) }

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

// peerClient is the HTTP client of calls to peers.
func peerClient(tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Peers are ax servers at their public_addr: a proxy from the
	// environment would see the cluster token.
	tr.Proxy = nil
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// errInsecurePeer: the call would send the cluster token in clear text.
var errInsecurePeer = errors.New("refused to send the cluster token over plain http (give the peer https, or set auth.allow_insecure_peers)")

// insecure reports whether base is a plain-http peer the cluster token may
// not be sent to: off the loopback interface, unless the operator allowed it.
func (n *Node) insecure(base string) bool {
	if n.cfg.ClusterToken == "" || n.cfg.AllowInsecurePeers {
		return false
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return err != nil
	}
	if h := u.Hostname(); h == "localhost" {
		return false
	} else if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return false
	}
	return true
}

// call sends one JSON request to a peer with the cluster token; out may be
// nil. A non-2xx answer is a *PeerError.
func (n *Node) call(ctx context.Context, base, method, path string, in, out any) (int, error) {
	if n.insecure(base) {
		n.log.Warn("peer call refused", "peer", base, "path", path, "err", errInsecurePeer)
		return 0, fmt.Errorf("%w: %s: %w", errNotSent, base, errInsecurePeer)
	}
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
	req.Header.Set(apiv1.HeaderForwarded, strconv.Itoa(hopsOf(ctx)+1))
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

// forwardSubmit sends keyed items to their key's home region in one batch
// and answers each with the home's answer.
func (n *Node) forwardSubmit(ctx context.Context, home string, items []*item) {
	fail := func(err error) {
		for _, it := range items {
			it.out.Err = err
		}
	}
	api, err := n.peerAPI(home)
	if err != nil {
		fail(err)
		return
	}
	req := apiv1.BatchRequest{}
	for _, it := range items {
		b, _ := json.Marshal(it.spec)
		req.Tasks = append(req.Tasks, b)
	}
	var resp apiv1.BatchResponse
	n.metrics.forwarded.WithLabelValues(n.cfg.Region, home).Inc()
	if _, err := n.call(ctx, api, http.MethodPost, "/v1/tasks/batch", req, &resp); err != nil {
		fail(fmt.Errorf("%w: %s: %v", ErrRegionUnavailable, home, err))
		return
	}
	for k, it := range items {
		if k >= len(resp.Results) {
			it.out.Err = fmt.Errorf("%w: short answer from %s", ErrRegionUnavailable, home)
			continue
		}
		it.out = outcomeOf(resp.Results[k], k)
	}
}

// outcomeOf is the outcome of the k-th task of a forwarded batch.
func outcomeOf(r apiv1.BatchItem, k int) Outcome {
	if r.Error != nil {
		// The peer names a field by its place in the batch it got; name it
		// by the spec, as a local error does (the API adds the caller's own
		// tasks[i] prefix).
		e := *r.Error
		if f, ok := strings.CutPrefix(e.Field, fmt.Sprintf("tasks[%d]", k)); ok && (f == "" || f[0] == '.') {
			e.Field = strings.TrimPrefix(f, ".")
		}
		return Outcome{Err: &PeerError{Status: r.Status, Body: e}}
	}
	o := Outcome{ID: r.Task.ID, State: r.Task.State, Region: r.Task.Region, Duplicate: r.Task.Duplicate}
	if r.Task.Pool != nil {
		o.Pool = *r.Task.Pool
	}
	return o
}

// forwardTarget says where a request about id must go when this server
// does not hold the task: the home region named in the id.
func (n *Node) forwardTarget(id string) (string, bool) {
	p, err := task.ParseID(id)
	// An id of a region outside the federation names no task we can have:
	// not found (404), not "unavailable".
	if err != nil || p.Region == n.cfg.Region || !n.KnownRegion(p.Region) {
		return "", false
	}
	return p.Region, true
}

// Proxy forwards one request to another region's server (about a task,
// or a DAG run: package dag reaches other regions through it). An answer
// with an error status is a *PeerError; no answer at all is
// ErrRegionUnavailable.
func (n *Node) Proxy(ctx context.Context, regionName, method, path string, in, out any) error {
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
