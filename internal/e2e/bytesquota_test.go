package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// TestPayloadBytesAreBoundedPerTenant: through real servers with auth on
// and two regions, what a tenant's payloads take of the region's Redis is
// bounded (docs/security.md "Payload bytes"): a payload over the default
// task.max_payload (64 KiB) is 413; a tenant at its max_backlog_bytes is
// 429 naming it, in a batch too, until a task finishes; a tenant flooding
// big payloads into a Redis with a maxmemory is refused (429 naming
// memory_reserve) once Redis nears it, while another tenant's submits are
// all accepted and Redis never runs out. Explain tells a tenant nothing of
// another tenant's pools or runs (its estimates are its own runs').
func TestPayloadBytesAreBoundedPerTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation")
	}
	fed := newFederation(t, fedOpts{
		pools: map[string]string{"us-east-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- {name: team-a-private, tags: {class: cpu}, slots: 4, price_per_slot_hour: 0.01, tenants: [team-a]}`},
		unserved: map[string][]string{"us-east-1": {"team-a-private"}},
		extra: `quotas:
  tenants:
    team-b: {max_backlog_bytes: 262144}
`})
	east := fed.region("us-east-1")
	// later is a task that waits an hour in us-east-1 with a payload of
	// about n bytes: it holds its payload in the region's Redis.
	later := func(n int) map[string]any {
		return map[string]any{"type": "noop", "delay": "1h", "tags": map[string]string{"class": "cpu"},
			"regions": []string{"us-east-1"}, "payload": map[string]string{"pad": strings.Repeat("x", n)}}
	}

	t.Run("payload limit and max_backlog_bytes", func(t *testing.T) {
		fed := fed.on(t)
		code, body := fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks", later(70_000))
		if e := apiErr(t, body); code != http.StatusRequestEntityTooLarge || e.Field != "payload" {
			t.Fatalf("a 70 kB payload (default max 64 KiB): %d %s", code, body)
		}
		var ids []string
		for range 4 { // 4 × ~60 kB fit in 256 KiB
			id, _ := fed.submit("us-east-1", tokSubmitterB, later(60_000))
			ids = append(ids, id)
		}
		code, body, hdr := fed.callHeader("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks", later(60_000))
		if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Field != "max_backlog_bytes" || hdr.Get("Retry-After") == "" {
			t.Fatalf("team-b's 5th 60 kB task (max_backlog_bytes 262144): %d %s", code, body)
		}
		code, body = fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks/batch", map[string]any{"tasks": []any{later(60_000)}})
		var br apiv1.BatchResponse
		if code != http.StatusOK || json.Unmarshal(body, &br) != nil || br.Rejected != 1 || br.Results[0].Error == nil ||
			br.Results[0].Status != http.StatusTooManyRequests || br.Results[0].Error.Field != "tasks[0].max_backlog_bytes" {
			t.Fatalf("the same in a batch: %d %s", code, body)
		}
		// Small payloads of team-a (no limit) are not refused.
		fed.submit("us-east-1", tokSubmitterA, later(60_000))
		// A cancel gives the bytes back.
		if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/tasks/"+ids[0]+"/cancel", nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, body)
		}
		ids[0], _ = fed.submit("us-east-1", tokSubmitterB, later(60_000))
		for _, id := range ids {
			if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/tasks/"+id+"/cancel", nil); code != http.StatusOK {
				t.Fatalf("cancel: %d %s", code, body)
			}
		}
	})

	t.Run("explain shows a tenant none of another's pools or runs", func(t *testing.T) {
		fed := fed.on(t)
		noop := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}
		for range 3 {
			id, _ := fed.submit("us-east-1", tokSubmitterB, noop)
			fed.waitState("us-east-1", tokSubmitterB, id, task.Success, 20*time.Second)
		}
		explain := func(tok string) apiv1.Explanation {
			code, body := fed.call("us-east-1", tok, http.MethodPost, "/v1/placement/explain", noop)
			var ex apiv1.Explanation
			if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
				t.Fatalf("explain: %d %s", code, body)
			}
			return ex
		}
		observed := func(ex apiv1.Explanation) (n int64) {
			for _, c := range ex.Candidates {
				n += c.Observations
			}
			return n
		}
		names := func(ex apiv1.Explanation) (s []string) {
			for _, c := range ex.Candidates {
				s = append(s, c.Region+"/"+c.Pool)
			}
			return s
		}
		// Estimates are learnt per tenant: team-b's explain shows its own
		// runs, team-a's (which never ran noop) none of them.
		deadline := time.Now().Add(20 * time.Second)
		for observed(explain(tokSubmitterB)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no server learnt team-b's noop run time in 20 s")
			}
			time.Sleep(200 * time.Millisecond)
		}
		a := explain(tokSubmitterA)
		if s := strings.Join(names(a), " "); !strings.Contains(s, "us-east-1/team-a-private") {
			t.Fatalf("team-a's explain lacks its own pool: %s", s)
		}
		for _, c := range a.Candidates {
			if c.Rejected == "" && (c.Observations != 0 || c.EstimateSource != "default") {
				t.Fatalf("team-a's explain shows team-b's runs: %+v", c)
			}
		}
		if s := strings.Join(names(explain(tokSubmitterB)), " "); strings.Contains(s, "team-a-private") {
			t.Fatalf("team-b's explain names team-a's pool: %s", s)
		}
	})

	t.Run("a flood of big payloads stops at the memory reserve", func(t *testing.T) {
		fed := fed.on(t)
		ctx := context.Background()
		used := func() (used, max int64) {
			info, err := east.rdb.Info(ctx, "memory").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(info, "\n") {
				k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
				switch k {
				case "used_memory":
					used, _ = strconv.ParseInt(v, 10, 64)
				case "maxmemory":
					max, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			return used, max
		}
		u, _ := used()
		limit := u + 40<<20
		if err := east.rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { east.rdb.ConfigSet(context.Background(), "maxmemory", "0") })

		var stop atomic.Bool
		var mu sync.Mutex
		var lat []time.Duration
		bCodes, aCodes := map[int]int{}, map[int]int{}
		var refusal []byte
		var retry string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // team-b: a small submit every 20 ms
			defer wg.Done()
			for !stop.Load() {
				start := time.Now()
				code, _, _ := fed.callHeader("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks", later(100))
				d := time.Since(start)
				mu.Lock()
				bCodes[code]++
				lat = append(lat, d)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
		flood := time.Now()
		var refusedAt atomic.Int64
		for range 6 { // team-a: 60 kB payloads as fast as it can
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000 && !stop.Load(); i++ {
					code, body, hdr := fed.callHeader("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", later(60_000))
					mu.Lock()
					aCodes[code]++
					if code == http.StatusTooManyRequests && refusal == nil {
						refusal, retry = body, hdr.Get("Retry-After")
						refusedAt.Store(int64(time.Since(flood)))
					}
					mu.Unlock()
					if code != http.StatusCreated {
						// The flood goes on a second past its first refusal.
						if at := refusedAt.Load(); at > 0 && time.Since(flood) > time.Duration(at)+time.Second {
							return
						}
					}
				}
			}()
		}
		// Stop once every flooder has stopped or at a bound.
		done := make(chan struct{})
		go func() {
			for time.Since(flood) < 90*time.Second {
				if at := refusedAt.Load(); at > 0 && time.Since(flood) > time.Duration(at)+2*time.Second {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			stop.Store(true)
			close(done)
		}()
		<-done
		wg.Wait()
		end, _ := used()
		if refusal == nil {
			t.Fatalf("team-a's flood was never refused: %v", aCodes)
		}
		e := apiErr(t, refusal)
		if e.Code != apiv1.CodeQuotaExceeded || e.Field != "memory_reserve" || retry == "" {
			t.Fatalf("team-a's flood (answers %v) was not refused for the memory reserve: %s", aCodes, refusal)
		}
		if len(bCodes) != 1 || bCodes[http.StatusCreated] == 0 {
			t.Fatalf("team-b's submits during the flood: %v, want all 201", bCodes)
		}
		if end >= limit {
			t.Fatalf("Redis used %d of maxmemory %d", end, limit)
		}
		t.Logf("team-a: %v (first refusal after %s, Redis %d MiB of %d MiB); team-b: %d submits, %s, max %s",
			aCodes, time.Duration(refusedAt.Load()).Round(time.Millisecond), end>>20, limit>>20, len(lat), dist(lat), maxOf(lat))
	})
}

// maxOf is the largest of ds.
func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
