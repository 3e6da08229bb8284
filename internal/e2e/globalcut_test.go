package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/netem"
	"github.com/ax-sched/ax/task"
)

// A region cut off from the global etcd keeps placing and running its own
// work on its own figures, past placement.stale_after and past the expiry
// of its registration there: tasks pinned to it, submitted to any of its
// servers during the cut, are accepted and run before the heal, and none
// is ever answered 422 (nor after the heal, while its registration is
// written again).
func TestRegionCutFromGlobalEtcdRunsItsOwnWork(t *testing.T) {
	const cut = "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2, ownEtcd: true, wan: &netem.Link{},
		extra: "placement: {stale_after: 3s}\n"})
	r := fed.region(cut)
	spec := map[string]any{"type": "sleep", "regions": []string{cut}, "payload": map[string]int{"ms": 1}}
	type sub struct {
		id string
		at time.Time
	}
	var subs []sub
	codes := map[int]int{}
	submit := func(k int) {
		s := r.servers[k%len(r.servers)]
		code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
		codes[code]++
		switch code {
		case http.StatusCreated:
			var out struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
				t.Fatalf("submit to %s: %s", s.name, body)
			}
			subs = append(subs, sub{out.ID, time.Now()})
		case http.StatusUnprocessableEntity:
			t.Errorf("%s answered 422 to a task pinned to its own live region: %s", s.name, body)
		}
	}

	start := time.Now()
	r.global.Partition()
	r.global.Cut()
	const cutFor = 12 * time.Second
	for k := 0; time.Since(start) < cutFor; k++ {
		submit(k)
		time.Sleep(100 * time.Millisecond)
	}
	// Everything accepted during the cut, but the last 2 s, ran before the heal.
	ran, late := 0, 0
	var lateIDs []string
	for _, s := range subs {
		if time.Since(s.at) < 2*time.Second {
			continue
		}
		tk, code := fed.getTask(cut, tokSubmitterA, s.id)
		if code == 200 && tk.State == task.Success {
			ran++
		} else {
			late++
			lateIDs = append(lateIDs, fmt.Sprintf("%s:%s", s.id, tk.State))
		}
	}
	t.Logf("during the %s cut: %d submits, answers %v; of those older than 2 s, %d ran before the heal, %d did not", cutFor, len(subs), codes, ran, late)
	if late > 0 || ran == 0 {
		t.Errorf("tasks accepted during the cut that did not run before the heal: %v", lateIDs)
	}
	accepted := len(subs)

	// The heal: the registration comes back; submits never get 422 meanwhile.
	r.global.Heal()
	healed := time.Now()
	for k := 0; time.Since(healed) < 6*time.Second; k++ {
		submit(k)
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range subs[accepted:] {
		fed.waitState(cut, tokSubmitterA, s.id, task.Success, 30*time.Second)
	}
	t.Logf("all: %d accepted, answers %v", len(subs), codes)
}
