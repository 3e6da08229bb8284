package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// Two federations on one machine, their Redis passwords alike (as two
// `ax dev` without any): the first's region Redis address comes to reach
// the second's Redis (its own stopped, the port taken). Its server and
// worker refuse that Redis on reconnecting: /readyz 503, an ERROR naming
// both identities, submits 503, nothing written there; when the address
// reaches its own Redis again, it serves again.
func TestRedisOfAnotherFederationRefused(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	a := newFederation(t, fedOpts{regions: []string{"us-east-1"}, redisLink: true, redisPassword: "same"})
	b := newFederation(t, fedOpts{regions: []string{"us-east-1"}, noWorkers: true, redisPassword: "same"})
	ra, rb := a.region("us-east-1"), b.region("us-east-1")
	srv := ra.servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ra.redisLink.SetTarget(rb.redis.Addr())
	ra.redisLink.Cut()
	waitUntil(t, 20*time.Second, "a's server refusing b's Redis (/readyz 503)", func() bool {
		code, _ := a.callAPI(srv.api, "", http.MethodGet, "/readyz", nil)
		return code == http.StatusServiceUnavailable
	})
	for _, p := range []*proc{srv, ra.workers[0]} {
		waitUntil(t, 20*time.Second, p.name+" logging the refusal", func() bool {
			return errorNamingBoth(p.log.String())
		})
	}
	code, body := a.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", map[string]any{"type": "noop"})
	if code != http.StatusServiceUnavailable {
		t.Errorf("submit while the address reaches another federation's Redis: %d %s, want 503", code, body)
	}
	if c, err := rb.store.Tasks().Counts(ctx); err != nil || c.Pending+c.Ready+c.Running != 0 {
		t.Errorf("b's Redis holds tasks after a's processes reached it: %+v, %v", c, err)
	}

	ra.redisLink.SetTarget(ra.redis.Addr())
	ra.redisLink.Cut()
	waitUntil(t, 20*time.Second, "a's server ready on its own Redis again", func() bool {
		code, _ := a.callAPI(srv.api, "", http.MethodGet, "/readyz", nil)
		return code == http.StatusOK
	})
	id, _ := a.submit("us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
	a.waitState("us-east-1", tokSubmitterA, id, task.Success, 20*time.Second)
}

// errorNamingBoth reports whether log has the refusal's ERROR line with
// the Redis's identity and the process's own, of two federations.
func errorNamingBoth(log string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "refusing a Redis of another owner") &&
			strings.Contains(l, "redis_identity=") && strings.Contains(l, "own_identity=") {
			return true
		}
	}
	return false
}
