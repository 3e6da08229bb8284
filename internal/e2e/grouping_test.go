package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/task"
)

// groupedSubmits: unique keys and debounce through real servers of two
// regions with auth on. Submits of one unique key through both regions at
// once create one task (the key's home decides); a handed-off holder
// releases its key once it finished where it went; reject answers 409
// naming unique_key; another tenant's key is its own; a debounced run
// ends with one task run and the others CANCELED (DEBOUNCED); bad input is
// a 400 naming the field.
func groupedSubmits(t *testing.T, fed *federation) {
	fed = fed.on(t)
	regions := []string{"us-east-1", "eu-west-1"}
	submitAll := func(spec map[string]any, each int) map[string]int {
		var mu sync.Mutex
		ids := map[string]int{}
		var wg sync.WaitGroup
		for i := 0; i < each; i++ {
			for _, r := range regions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, body := fed.call(r, tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
					var out struct{ ID string }
					if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(body, &out) != nil {
						t.Errorf("submit via %s: %d %s", r, code, body)
						return
					}
					mu.Lock()
					ids[out.ID]++
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		return ids
	}
	one := func(ids map[string]int) string {
		t.Helper()
		if len(ids) != 1 {
			t.Fatalf("%d tasks created, want 1: %v", len(ids), ids)
		}
		for id := range ids {
			return id
		}
		return ""
	}
	homes := submit.New(submit.Config{Regions: regions})
	t.Run("unique key across regions", func(t *testing.T) {
		for i, to := range regions {
			// A key whose home is the other region: its holder is handed
			// off, and the home sees only its forwarding record.
			key := fmt.Sprintf("nightly-%d-%s", i, randomHex(4))
			for homes.KeyHome("team-a", key) == to {
				key = fmt.Sprintf("nightly-%d-%s", i, randomHex(4))
			}
			spec := map[string]any{"type": "sleep", "payload": map[string]int{"ms": 300}, "regions": []string{to},
				"tags": map[string]string{"class": "cpu"}, "unique_key": key}
			id := one(submitAll(spec, 4))
			code, body := fed.call(regions[1-i], tokSubmitterA, http.MethodPost, "/v1/tasks",
				merge(spec, map[string]any{"unique_conflict": "reject"}))
			if code != http.StatusConflict || !jsonHas(body, "field", "unique_key") {
				t.Fatalf("reject: %d %s", code, body)
			}
			if other, _ := fed.submitAs(regions[i], tokSubmitterB, spec); other == id || other == "" {
				t.Fatalf("team-b's submit of team-a's key: %q", other)
			}
			fed.waitState(regions[0], tokSubmitterA, id, task.Success, 20*time.Second)
			next := one(submitAll(spec, 2))
			if next == id {
				t.Fatalf("the key of %s (finished in %s) still held", id, to)
			}
		}
	})
	t.Run("debounce across regions", func(t *testing.T) {
		key := "sync-" + randomHex(4)
		spec := map[string]any{"type": "sleep", "payload": map[string]int{"ms": 1}, "debounce_key": key, "debounce": "1500ms"}
		var ids []string
		for i := 0; i < 4; i++ {
			id, _ := fed.submitAs(regions[i%2], tokSubmitterA, spec)
			ids = append(ids, id)
		}
		last := ids[len(ids)-1]
		fed.waitState(regions[0], tokSubmitterA, last, task.Success, 20*time.Second)
		for _, id := range ids[:len(ids)-1] {
			tk, _ := fed.getTask(regions[1], tokSubmitterA, id)
			if tk.State != task.Canceled || tk.Reason != task.ReasonDebounced {
				t.Fatalf("replaced %s: %s %s", id, tk.State, tk.Reason)
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			field string
			spec  map[string]any
		}{
			{"unique_for", map[string]any{"type": "sleep", "unique_key": "bad-" + randomHex(4), "unique_for": "-1s"}},
			{"debounce", map[string]any{"type": "sleep", "debounce_key": "bad-" + randomHex(4), "debounce": "1s", "delay": "1m"}},
		} {
			code, body := fed.call(regions[0], tokSubmitterA, http.MethodPost, "/v1/tasks", c.spec)
			if code != http.StatusBadRequest || !jsonHas(body, "field", c.field) {
				t.Fatalf("%v: %d %s, want 400 naming %s", c.spec, code, body, c.field)
			}
		}
	})
}

// submitAs posts spec through region with token: the task's id and
// whether it was a repeat (200); any other answer fails the test.
func (f *federation) submitAs(region, token string, spec map[string]any) (string, bool) {
	f.t.Helper()
	code, body := f.call(region, token, http.MethodPost, "/v1/tasks", spec)
	var out struct{ ID string }
	if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(body, &out) != nil {
		f.t.Fatalf("submit via %s: %d %s", region, code, body)
	}
	return out.ID, code == http.StatusOK
}

func merge(a, b map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// jsonHas reports whether the error body's field key has value want.
func jsonHas(body []byte, key, want string) bool {
	var e struct {
		Error map[string]any `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error[key] == want
}
