package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// One region's Redis frozen (SIGSTOP: connections accepted, nothing
// answered), with two regions, auth on and real workers. Once its servers'
// probe has seen no answer (ax_redis_healthy 0), what needs that Redis is
// answered 503 unavailable with Retry-After and the JSON error: a task held
// there (read from its own region and from the other, which forwards), a
// submit placed there. The other region keeps accepting and running its
// work. After SIGCONT the frozen region accepts again and every task
// accepted before, during and after the freeze runs to SUCCESS (one
// delayed past the freeze, so it was still waiting when Redis stopped).
func TestFrozenRedisAnswers503AndLosesNothing(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	inUS := map[string]any{"type": "noop", "regions": []string{"us-east-1"}}
	inEU := map[string]any{"type": "noop", "regions": []string{"eu-west-1"}}
	var accepted []string // every task a 201 accepted, with the region to read it from
	from := map[string]string{}
	submit := func(region string, spec map[string]any) string {
		id, _ := fed.submit(region, tokSubmitterA, spec)
		accepted = append(accepted, id)
		from[id] = region
		return id
	}
	held := submit("us-east-1", inUS)
	fed.waitState("us-east-1", tokSubmitterA, held, task.Success, 20*time.Second)
	for range 5 {
		submit("us-east-1", inUS)
	}
	submit("us-east-1", map[string]any{"type": "noop", "regions": []string{"us-east-1"}, "delay": "3s"})

	rd := fed.region("us-east-1").redis
	rd.Pause()
	t.Cleanup(rd.Resume)
	us := fed.server("us-east-1").api
	waitUntil(t, 10*time.Second, "ax_redis_healthy 0 in us-east-1 with its Redis frozen", func() bool {
		return metric(t, us, "ax_redis_healthy") == 0
	})
	for _, c := range []struct {
		region, method, path string
		body                 any
	}{
		{"us-east-1", http.MethodGet, "/v1/tasks/" + held, nil},
		{"eu-west-1", http.MethodGet, "/v1/tasks/" + held, nil},
		{"us-east-1", http.MethodPost, "/v1/tasks", inUS},
		{"us-east-1", http.MethodGet, "/v1/tasks/" + held + "/trail", nil},
	} {
		code, body, hdr := fed.callHeader(c.region, tokSubmitterA, c.method, c.path, c.body)
		var eb apiv1.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || code != http.StatusServiceUnavailable ||
			eb.Error.Code != apiv1.CodeUnavailable || eb.Error.Message == "" || hdr.Get("Retry-After") == "" ||
			hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s via %s with us-east-1's Redis frozen: %d %s (Retry-After %q, Content-Type %q), want 503 unavailable as JSON with Retry-After",
				c.method, c.path, c.region, code, body, hdr.Get("Retry-After"), hdr.Get("Content-Type"))
		}
	}
	// The other region is not held up by it.
	during := submit("eu-west-1", inEU)
	fed.waitState("eu-west-1", tokSubmitterA, during, task.Success, 20*time.Second)
	if code, body := fed.call("eu-west-1", "", http.MethodGet, "/readyz", nil); code != http.StatusOK {
		t.Errorf("eu-west-1's /readyz with us-east-1's Redis frozen: %d %s", code, body)
	}
	if metric(t, fed.server("eu-west-1").api, "ax_redis_healthy") != 1 {
		t.Error("eu-west-1's ax_redis_healthy is not 1 while only us-east-1's Redis is frozen")
	}

	rd.Resume()
	waitUntil(t, 20*time.Second, "a submit to us-east-1 once its Redis resumed", func() bool {
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", inUS)
		var r struct {
			ID string `json:"id"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.ID == "" {
			return false
		}
		accepted = append(accepted, r.ID)
		from[r.ID] = "us-east-1"
		return true
	})
	for _, id := range accepted {
		fed.waitState(from[id], tokSubmitterA, id, task.Success, 30*time.Second)
	}
	if code, _ := fed.call("eu-west-1", tokSubmitterA, http.MethodGet, "/v1/tasks/"+held, nil); code != http.StatusOK {
		t.Errorf("us-east-1's task read via eu-west-1 after the freeze: %d", code)
	}
}
