package federation_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Placement across regions, backpressure,
// region failure, drain, live prices, hand-off exactly once, no capacity,
// keyed submits. Three regions, real etcd, real Redis, real HTTP.

var (
	x86     = map[string]string{"arch": "x86"}
	x86Spot = map[string]string{"arch": "x86", "class": "spot"}
)

// wantReasons is what every candidate of an explanation must say for a task
// with tags and regions: TAG_MISMATCH, then REGION_EXCLUDED, else eligible
// ("") — every harness pool has live slots and room.
func wantReasons(tags map[string]string, regions []string) map[string]string {
	out := map[string]string{}
	for _, r := range fedtest.Regions {
		for _, p := range fedtest.PricedPools[r] {
			reason := ""
			for k, v := range tags {
				if p.Tags[k] != v {
					reason = "TAG_MISMATCH"
				}
			}
			if reason == "" && len(regions) > 0 && !slices.Contains(regions, r) {
				reason = "REGION_EXCLUDED"
			}
			out[r+"/"+p.Name] = reason
		}
	}
	return out
}

// checkExplanation checks every pool is listed once with its reason, and the
// one chosen is region/pool, the cheapest eligible.
func checkExplanation(t *testing.T, ex apiv1.Explanation, want map[string]string, region, pool string) {
	t.Helper()
	if len(ex.Candidates) != len(want) {
		t.Fatalf("explanation lists %d pools, want every one of %d: %+v", len(ex.Candidates), len(want), ex.Candidates)
	}
	chosen := 0
	for _, c := range ex.Candidates {
		key := c.Region + "/" + c.Pool
		w, ok := want[key]
		if !ok {
			t.Fatalf("unknown candidate %s", key)
		}
		if c.Rejected != w {
			t.Errorf("%s: reason %q, want %q", key, c.Rejected, w)
		}
		if c.Chosen {
			chosen++
			if key != region+"/"+pool {
				t.Errorf("chosen %s, want %s/%s", key, region, pool)
			}
		}
		if c.Rejected == "" && ex.Chosen != nil && c.Score < ex.Chosen.Score {
			t.Errorf("%s scores %v, below the chosen %v", key, c.Score, ex.Chosen.Score)
		}
		if want := fedtest.PriceOf(c.Region, c.Pool); c.PricePerSlotHour != want {
			t.Errorf("%s: price %v, want %v", key, c.PricePerSlotHour, want)
		}
	}
	if chosen != 1 || ex.Chosen == nil || ex.Chosen.Region != region || ex.Chosen.Pool != pool || ex.Outcome != "PLACED" {
		t.Fatalf("chosen %d pools (%+v), outcome %s; want exactly %s/%s, PLACED", chosen, ex.Chosen, ex.Outcome, region, pool)
	}
}

// The cheapest eligible pool wins across regions; tags and
// regions filter; explain lists every pool with its reason.
func TestPlacementCheapestEligiblePool(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	cases := []struct {
		name       string
		tags       map[string]string
		regions    []string
		wantRegion string
		wantPool   string
	}{
		{"any x86: Azure spot is the cheapest slot", x86, nil, az, poolSpot},
		{"on-demand only: AWS and Azure tie at 0.048, the region name breaks it", map[string]string{"arch": "x86", "class": "on-demand"}, nil, aws, poolCPU},
		{"regions filter: only GCP", x86, []string{gcp}, gcp, poolSpot},
		{"regions filter: AWS or GCP", x86Spot, []string{aws, gcp}, gcp, poolSpot},
		{"a100: GCP's A100 is cheaper than Azure's", map[string]string{"gpu": "a100"}, nil, gcp, poolGPU},
		{"a100 in Azure only", map[string]string{"gpu": "a100"}, []string{az}, az, poolGPU},
		{"l4: AWS only", map[string]string{"gpu": "l4"}, nil, aws, poolGPU},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := spec{"type": "report.generate", "tags": tc.tags}
			if tc.regions != nil {
				sp["regions"] = tc.regions
			}
			want := wantReasons(tc.tags, tc.regions)
			// Every server decides alike from the same view.
			for _, srv := range fedtest.Regions {
				checkExplanation(t, f.Explain(srv, sp), want, tc.wantRegion, tc.wantPool)
			}
			sr := f.SubmitOK(aws, tokAcme, sp)
			if sr.Region != tc.wantRegion || sr.Pool == nil || *sr.Pool != tc.wantPool {
				t.Fatalf("submit placed on %s/%v, want %s/%s", sr.Region, deref(sr.Pool), tc.wantRegion, tc.wantPool)
			}
			fedtest.Eventually(t, 10*time.Second, "the task is READY in its pool, in one region only", func() bool {
				w := f.Where(ctx, sr.ID)
				if len(w) != 1 || w[0] != tc.wantRegion {
					return false
				}
				tk, err := f.R(tc.wantRegion).Store.Get(ctx, sr.ID)
				return err == nil && tk.State == task.Ready && tk.Pool == tc.wantPool
			})
		})
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// A saturated cheapest pool spills to the next cheapest; a
// 10 000-task burst fills the pools cheapest first, each to its headroom.
func TestSaturationSpillsToTheNextCheapest(t *testing.T) {
	// Azure spot (the cheapest) holds 20: saturated at 16 ready (hard watermark 0.8).
	f := newFed(t, fedtest.WithCapacity(az, poolSpot, 20))
	ctx := fedtest.Ctx(t)
	sp := spec{"type": "etl.step", "tags": x86Spot}
	// Its 4 slots busy, so its headroom is its queue alone.
	for i := 0; i < 4; i++ {
		if sr := f.SubmitOK(az, tokAcme, sp); sr.Region != az || deref(sr.Pool) != poolSpot {
			t.Fatalf("task %d went to %s/%s, want the cheapest pool", i, sr.Region, deref(sr.Pool))
		}
	}
	held, err := f.R(az).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "busy", N: 4})
	if err != nil || len(held) != 4 {
		t.Fatalf("claim: %d tasks, %v", len(held), err)
	}
	fedtest.Eventually(t, 5*time.Second, "the view shows the 4 running", func() bool {
		ri, _ := f.R(az).Node().View().Region(az)
		for _, p := range ri.Pools {
			if p.Name == poolSpot {
				return p.Running == 4 && p.Ready == 0
			}
		}
		return false
	})
	got := map[string]int{}
	for i := 0; i < 40; i++ {
		sr := f.SubmitOK(az, tokAcme, sp)
		got[sr.Region+"/"+deref(sr.Pool)]++
	}
	t.Logf("40 submits: %v", got)
	cheapest, next := got[az+"/"+poolSpot], got[gcp+"/"+poolSpot]
	// The cheapest takes work up to its hard (spill) watermark, 16 of 20,
	// and not past it.
	if cheapest != 16 {
		t.Errorf("the cheapest pool took %d, want 16 (capacity × hard watermark)", cheapest)
	}
	if next != 40-cheapest {
		t.Errorf("spilled %d to the next cheapest (gcp spot), want every other task (%d): %v", next, 40-cheapest, got)
	}
	// With the figures published, the explanation says why.
	fedtest.Eventually(t, 5*time.Second, "published figures show the queue", func() bool {
		ri, _ := f.R(aws).Node().View().Region(az)
		for _, p := range ri.Pools {
			if p.Name == poolSpot {
				return p.Ready == cheapest
			}
		}
		return false
	})
	ex := f.Explain(aws, sp)
	for _, c := range ex.Candidates {
		if c.Region == az && c.Pool == poolSpot && (c.Chosen || c.Penalty <= 1) {
			t.Errorf("the full pool is %+v; want a watermark penalty and not chosen", c)
		}
	}
	if ex.Chosen == nil || ex.Chosen.Region != gcp || ex.Chosen.Pool != poolSpot {
		t.Errorf("explain chose %+v, want gcp spot", ex.Chosen)
	}
	for _, h := range held {
		if _, err := f.R(az).Store.Claimer().Complete(ctx, queue.Completion{ID: h.ID, Token: h.LeaseToken}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBurstFillsCheapestFirst(t *testing.T) {
	testenv.Slow(t)
	// Room for 12 824 below the hard watermark (0.8 × capacity + 4 free
	// slots each); the cheapest pool has the most.
	caps := map[string]int{
		az + "/" + poolSpot: 4000, gcp + "/" + poolSpot: 2000, aws + "/" + poolSpot: 1000,
		aws + "/" + poolCPU: 3000, gcp + "/" + poolCPU: 3000, az + "/" + poolCPU: 3000,
	}
	var opts []fedtest.Option
	for k, n := range caps {
		r, p, _ := strings.Cut(k, "/")
		opts = append(opts, fedtest.WithCapacity(r, p, n))
	}
	f := newFed(t, opts...)
	// Every pool is new in the view at the start, where herd damping
	// spreads choices: the burst comes once each has published
	// again.
	time.Sleep(4 * testPublish)
	got := map[string]int{}
	placedAt := map[string]string{} // id → region/pool of its submit's answer, "" unplaced
	rejected, unplaced := 0, 0
	var firstRejection *apiv1.BatchItem
	start := time.Now()
	for call := 0; call < 10; call++ {
		req := apiv1.BatchRequest{}
		for i := 0; i < 1000; i++ {
			req.Tasks = append(req.Tasks, []byte(fmt.Sprintf(`{"type":"burst.item","tags":{"arch":"x86"},"payload":{"n":%d}}`, call*1000+i)))
		}
		var br apiv1.BatchResponse
		f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/batch", tokAcme, req).Want(t, http.StatusOK).JSON(t, &br)
		if len(br.Results) != 1000 || br.Accepted+br.Rejected != 1000 {
			t.Fatalf("batch %d: %d results, %d accepted, %d rejected", call, len(br.Results), br.Accepted, br.Rejected)
		}
		for _, it := range br.Results {
			switch {
			case it.Task == nil:
				rejected++
				if firstRejection == nil {
					firstRejection = &it
				}
			case it.Task.Pool == nil:
				// Accepted unplaced (NO_CAPACITY: the leader places it):
				// what a batch gets when this server's view of the figures
				// went stale, as under a heavily loaded machine; not a
				// pool's share.
				unplaced++
			default:
				got[it.Task.Region+"/"+deref(it.Task.Pool)]++
			}
			if it.Task != nil {
				placedAt[it.Task.ID] = ""
				if it.Task.Pool != nil {
					placedAt[it.Task.ID] = it.Task.Region + "/" + *it.Task.Pool
				}
			}
		}
	}
	t.Logf("10 000 in %v: %v (rejected %d, accepted unplaced %d)", time.Since(start).Round(time.Millisecond), got, rejected, unplaced)
	if rejected > 0 {
		t.Errorf("%d rejected; the pools have room for every task (the first: %d %+v)", rejected, firstRejection.Status, firstRejection.Error)
	}
	if unplaced > 5000 {
		t.Errorf("%d of 10 000 accepted unplaced: the view was stale for most of the burst", unplaced)
	}
	best, bestN := "", 0
	for k, n := range got {
		if n > bestN {
			best, bestN = k, n
		}
		hard := int(float64(caps[k])*0.8) + 4
		// Backpressure: no pool is filled far past its hard watermark.
		if float64(n) > 1.1*float64(hard) {
			t.Errorf("%s got %d, past its headroom %d", k, n, hard)
		}
	}
	if best != az+"/"+poolSpot {
		t.Errorf("the largest share went to %s (%d); want the cheapest pool, az spot", best, bestN)
	}
	// Spot pools, cheapest first and with the most room, fill in that order.
	if !(got[az+"/"+poolSpot] > got[gcp+"/"+poolSpot] && got[gcp+"/"+poolSpot] > got[aws+"/"+poolSpot]) {
		t.Errorf("spot shares not ordered by headroom: %v", got)
	}
	// Fill before spill: pools fill in price order, each to its
	// headroom before a dearer one gets work, so at most one pool holds a
	// partial share; the burst (10 000) is short of the room (12 824), so
	// some pool got nothing. One more partial pool is the
	// herd damping's: until a pool new in the view has published figures
	// again, each server counts on its share of the pool's headroom only
	// (the burst starts after a few publications, but a loaded machine
	// delays them).
	partial, idle := 0, 0
	for k := range caps {
		hard := int(float64(caps[k])*0.8) + 4
		switch n := got[k]; {
		case n == 0:
			idle++
		case n < hard*99/100:
			partial++
		}
	}
	if partial > 2 || idle == 0 {
		t.Errorf("%v: %d pools partly filled, %d idle; want at most 2 partly filled and the dearest idle", got, partial, idle)
	}
	checkHomeShare(t, f, placedAt)
}

// checkHomeShare checks the burst's home region (aws) holds its own share
// READY at once, each task in the pool its submit named. A home pool may
// hold more, placed there since by the leader: tasks the batch accepted
// unplaced, and hand-offs a target refused or never received
// (HANDOFF_REFUSED); none of those is live in another region. (The
// hand-offs take ~10 s with -race; TestDrainMovesEveryReadyTaskExactlyOnce
// checks that hand-offs deliver every task once.)
func checkHomeShare(t *testing.T, f *fed, placedAt map[string]string) {
	t.Helper()
	ctx := fedtest.Ctx(t)
	var later []string
	for _, p := range []string{poolCPU, poolSpot} {
		ready := map[string]bool{}
		for before := ""; ; {
			ts, more, err := f.R(aws).Store.Tasks().List(ctx, queue.ListQuery{State: task.Ready, Pool: p, Before: before, Limit: queue.MaxList})
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				ready[tk.ID] = true
			}
			if !more || len(ts) == 0 {
				break
			}
			before = ts[len(ts)-1].ID
		}
		placed := 0
		for id, at := range placedAt {
			if at == aws+"/"+p {
				placed++
				if !ready[id] {
					t.Errorf("%s: placed in %s/%s, not READY there", id, aws, p)
				}
			}
		}
		for id := range ready {
			switch at, ok := placedAt[id]; {
			case at == aws+"/"+p:
			case ok && at == "":
				later = append(later, id)
			default:
				tr, err := f.R(aws).Store.Tasks().Trail(ctx, id)
				if err != nil || !fedtest.HasReason(tr, task.ReasonHandOffRefused) && !fedtest.HasReason(tr, task.ReasonHandOffRevoked) {
					t.Errorf("%s: READY in %s/%s, placed in %q by its submit and never refused by the target: %+v", id, aws, p, at, tr)
				}
				later = append(later, id)
			}
		}
		t.Logf("%s/%s: %d READY, %d of them placed there by their submits", aws, p, len(ready), placed)
	}
	// A target that got one of them holds it unrun until it asks this
	// region's word, and drops it then.
	fedtest.Eventually(t, 20*time.Second, "the tasks placed at home later are live there only", func() bool {
		for _, id := range later {
			if w := f.Where(ctx, id); len(w) != 1 || w[0] != aws {
				return false
			}
		}
		return true
	})
}

// A killed region gets no new work within TTL + stale_after +
// grace; its queued tasks stay in its Redis; it is placed on again after a
// restart.
func TestKilledRegionIsAvoidedAndComesBack(t *testing.T) {
	testenv.Slow(t)
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	sp := spec{"type": "etl.step", "tags": x86}
	var queued []string
	for i := 0; i < 5; i++ {
		sr := f.SubmitOK(az, tokAcme, sp)
		if sr.Region != az {
			t.Fatalf("placed on %s, want %s (the cheapest)", sr.Region, az)
		}
		queued = append(queued, sr.ID)
	}
	f.R(az).Crash()
	killed := time.Now()
	bound := testTTL + testStale + testGrace
	took := fedtest.Eventually(t, bound+time.Second, "no server places on the killed region", func() bool {
		for _, srv := range []string{aws, gcp} {
			ex := f.Explain(srv, sp)
			for _, c := range ex.Candidates {
				if c.Region == az && c.Rejected == "" {
					return false
				}
			}
			if ex.Chosen == nil || ex.Chosen.Region == az {
				return false
			}
		}
		return true
	})
	t.Logf("killed region avoided after %v (bound %v)", took.Round(time.Millisecond), bound)
	if time.Since(killed) > bound+time.Second {
		t.Fatalf("took %v, bound is TTL + stale_after + grace = %v", time.Since(killed), bound)
	}
	for i := 0; i < 10; i++ {
		for _, srv := range []string{aws, gcp} {
			if sr := f.SubmitOK(srv, tokAcme, sp); sr.Region == az {
				t.Fatalf("a task was placed on the killed region: %+v", sr)
			}
		}
	}
	// Its queued tasks wait in its Redis.
	for _, id := range queued {
		tk, err := f.R(az).Store.Get(ctx, id)
		if err != nil || tk.State != task.Ready || tk.Pool != poolSpot {
			t.Fatalf("queued task %s after the kill: %+v, %v", id, tk, err)
		}
	}
	f.R(az).Start()
	fedtest.Eventually(t, 10*time.Second, "the restarted region is chosen again", func() bool {
		for _, srv := range fedtest.Regions {
			if ex := f.Explain(srv, sp); ex.Chosen == nil || ex.Chosen.Region != az {
				return false
			}
		}
		return true
	})
	if sr := f.SubmitOK(aws, tokAcme, sp); sr.Region != az {
		t.Fatalf("after the restart placed on %s, want %s", sr.Region, az)
	}
	for _, id := range queued {
		if w := f.Where(ctx, id); len(w) != 1 || w[0] != az {
			t.Fatalf("queued task %s is in %v", id, w)
		}
	}
}

// Drain moves a region's READY tasks elsewhere through the
// hand-off; every task ends in exactly one place.
func TestDrainMovesEveryReadyTaskExactlyOnce(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	req := apiv1.BatchRequest{}
	for i := 0; i < 300; i++ {
		req.Tasks = append(req.Tasks, []byte(fmt.Sprintf(`{"type":"drain.me","tags":{"arch":"x86"},"payload":%d}`, i)))
	}
	var br apiv1.BatchResponse
	f.Call(http.MethodPost, f.R(az).URL()+"/v1/tasks/batch", tokAcme, req).Want(t, http.StatusOK).JSON(t, &br)
	var ids []string
	for _, it := range br.Results {
		if it.Task == nil || it.Task.Region != az {
			t.Fatalf("not placed in %s: %+v", az, it)
		}
		ids = append(ids, it.Task.ID)
	}
	// A submitter may not drain; an operator may, through any server.
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/regions/"+az+"/drain", tokAcme, struct{}{}).Want(t, http.StatusForbidden)
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/regions/"+az+"/drain?rate=0", tokOperator, struct{}{}).Want(t, http.StatusBadRequest)
	var dr apiv1.DrainResponse
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/regions/"+az+"/drain?rate=5000", tokOperator, struct{}{}).Want(t, http.StatusOK).JSON(t, &dr)
	if dr.Region != az || dr.Moved != len(ids) {
		t.Fatalf("drain: %+v, want %d moved", dr, len(ids))
	}
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	per := map[string]int{}
	for _, id := range ids {
		w := f.Where(ctx, id)
		if len(w) != 1 {
			t.Fatalf("task %s lives in %v: want exactly one place", id, w)
		}
		if w[0] == az {
			t.Fatalf("task %s was not drained", id)
		}
		per[w[0]]++
		home, err := f.R(az).Store.Get(ctx, id)
		if err != nil || home.State != task.HandedOff || home.HandedOffTo != w[0] {
			t.Fatalf("home record of %s: %+v, %v", id, home, err)
		}
	}
	total := 0
	for _, name := range fedtest.Regions {
		c, err := f.R(name).Store.Tasks().Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += c.Ready
		if name == az && (c.Ready != 0 || c.Pending != 0) {
			t.Fatalf("drained region still holds %d ready, %d pending", c.Ready, c.Pending)
		}
	}
	if total != len(ids) {
		t.Fatalf("%d READY across the regions, want %d (none lost, none duplicated)", total, len(ids))
	}
	t.Logf("drained %d: %v", len(ids), per)
	// The trail tells the story, read through the home region.
	tr := f.Trail(az, tokAcme, ids[0])
	if !fedtest.HasReason(tr, task.ReasonDrained) || !fedtest.HasReason(tr, task.ReasonHandedOff) {
		t.Fatalf("trail lacks DRAINED / HANDED_OFF: %+v", tr)
	}
}

// A live price override flips the choice within a second; a
// delayed task is placed with the price of when it becomes due.
func TestPriceOverrideFlipsPlacement(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	sp := spec{"type": "etl.step", "tags": x86}
	for _, srv := range fedtest.Regions {
		if ex := f.Explain(srv, sp); ex.Chosen == nil || ex.Chosen.Region != az {
			t.Fatalf("before the override %s chooses %+v", srv, ex.Chosen)
		}
	}
	delayed := f.SubmitOK(aws, tokAcme, spec{"type": "etl.step", "tags": x86, "delay": "2s"})
	if delayed.State != task.Pending || delayed.Pool != nil {
		t.Fatalf("a delayed task is placed when due, not now: %+v", delayed)
	}
	// Azure spot becomes dearer than every CPU pool but GCP on-demand.
	if _, err := f.EtcdCli.Put(ctx, "/ax/prices/"+az+"/"+poolSpot, `{"price_per_slot_hour": 0.05}`); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	took := fedtest.Eventually(t, time.Second, "every server flips to GCP spot", func() bool {
		for _, srv := range fedtest.Regions {
			if ex := f.Explain(srv, sp); ex.Chosen == nil || ex.Chosen.Region != gcp || ex.Chosen.Pool != poolSpot {
				return false
			}
		}
		return true
	})
	t.Logf("price override applied after %v", took.Round(time.Millisecond))
	var regions apiv1.RegionsResponse
	f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/regions", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &regions)
	for _, r := range regions.Regions {
		for _, p := range r.Pools {
			if r.Name == az && p.Name == poolSpot && p.PricePerSlotHour != 0.05 {
				t.Fatalf("/v1/regions shows %v for the overridden pool", p.PricePerSlotHour)
			}
		}
	}
	if sr := f.SubmitOK(az, tokAcme, sp); sr.Region != gcp || deref(sr.Pool) != poolSpot {
		t.Fatalf("after the override placed on %s/%s", sr.Region, deref(sr.Pool))
	}
	// The delayed task, due 2 s after submit, goes where it is cheapest then.
	fedtest.Eventually(t, 10*time.Second, "the delayed task placed with the new price", func() bool {
		tk, rep := f.GetTask(aws, tokAcme, delayed.ID)
		return rep.Status == http.StatusOK && tk.State == task.Ready && tk.HeldBy == gcp && tk.Pool == poolSpot
	})
	if time.Since(set) < 500*time.Millisecond {
		t.Fatal("the delayed task ran early")
	}
	// Removing the override restores the list price.
	if _, err := f.EtcdCli.Delete(ctx, "/ax/prices/"+az+"/"+poolSpot); err != nil {
		t.Fatal(err)
	}
	fedtest.Eventually(t, time.Second, "the list price is back", func() bool {
		ex := f.Explain(aws, sp)
		return ex.Chosen != nil && ex.Chosen.Region == az
	})
}

// A hand-off whose answer is lost yields exactly one task.
func TestHandOffAnswerLostMakesOneCopy(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	sp := spec{"type": "etl.step", "tags": x86}

	check := func(t *testing.T, id string, attempts *atomic.Int32) {
		t.Helper()
		fedtest.Eventually(t, 10*time.Second, "the home record is HANDED_OFF", func() bool {
			tk, err := f.R(aws).Store.Get(ctx, id)
			return err == nil && tk.State == task.HandedOff
		})
		if n := attempts.Load(); n < 2 {
			t.Fatalf("the receiver saw %d hand-off attempts; want the retry", n)
		}
		if w := f.Where(ctx, id); len(w) != 1 || w[0] != az {
			t.Fatalf("task lives in %v, want exactly [%s]", w, az)
		}
		home, _ := f.R(aws).Store.Get(ctx, id)
		if home.HandedOffTo != az {
			t.Fatalf("home forwards to %q", home.HandedOffTo)
		}
		tk, rep := f.GetTask(aws, tokAcme, id)
		rep.Want(t, http.StatusOK)
		if tk.HeldBy != az || tk.State != task.Ready || tk.Pool != poolSpot || tk.Region != aws {
			t.Fatalf("GET through the home region: %+v", tk)
		}
		if tr := f.Trail(aws, tokAcme, id); !fedtest.HasReason(tr, task.ReasonHandedOff) {
			t.Fatalf("trail lacks HANDED_OFF: %+v", tr)
		}
		// A late duplicate of the hand-off is answered "accepted" and adds nothing.
		tkStore, _ := f.R(aws).Store.Get(ctx, id)
		body, _ := json.Marshal(tkStore.Spec())
		var hr apiv1.HandOffResponse
		f.Call(http.MethodPost, f.R(az).URL()+"/v1/internal/handoff", tokCluster,
			apiv1.HandOff{ID: id, Pool: poolSpot, Spec: body}).Want(t, http.StatusOK).JSON(t, &hr)
		if !hr.Accepted {
			t.Fatalf("a repeat of a known id: %+v", hr)
		}
		if w := f.Where(ctx, id); len(w) != 1 {
			t.Fatalf("after a repeat the task lives in %v", w)
		}
	}

	t.Run("receiver accepted, answer dropped", func(t *testing.T) {
		var attempts atomic.Int32
		var dropped atomic.Bool
		intercept := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.URL.Path != "/v1/internal/handoff" {
				next.ServeHTTP(w, r)
				return
			}
			attempts.Add(1)
			if dropped.CompareAndSwap(false, true) {
				// The receiver does the work; the answer never reaches the sender.
				next.ServeHTTP(httptest.NewRecorder(), r)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		}
		f.R(az).Intercept.Store(&intercept)
		defer f.R(az).Intercept.Store(nil)
		sr := f.SubmitOK(aws, tokAcme, sp)
		if sr.Region != az {
			t.Fatalf("placed on %s, want %s", sr.Region, az)
		}
		check(t, sr.ID, &attempts)
	})

	t.Run("first attempt landed before the sender asked", func(t *testing.T) {
		// The test delivers the hand-off itself (as if the sender's first
		// attempt had landed); the sender's own first call times out at a
		// gateway (503), so it retries the same target with the same id.
		var attempts atomic.Int32
		url := f.R(az).URL()
		var mu sync.Mutex
		delivered := map[string]bool{}
		intercept := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.URL.Path != "/v1/internal/handoff" || r.Header.Get(apiv1.HeaderForwarded) == "" {
				next.ServeHTTP(w, r)
				return
			}
			attempts.Add(1)
			var h apiv1.HandOff
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &h)
			mu.Lock()
			first := !delivered[h.ID]
			delivered[h.ID] = true
			mu.Unlock()
			if first {
				// What the lost first attempt would have done.
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/internal/handoff", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+tokCluster)
				var hr apiv1.HandOffResponse
				resp, err := f.HTTP.Do(req)
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&hr)
					resp.Body.Close()
				}
				if err != nil || !hr.Accepted {
					t.Errorf("direct hand-off: %+v, %v", hr, err)
				}
				attempts.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"gateway timeout"}}`))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r)
		}
		f.R(az).Intercept.Store(&intercept)
		defer f.R(az).Intercept.Store(nil)
		sr := f.SubmitOK(aws, tokAcme, sp)
		if sr.Region != az {
			t.Fatalf("placed on %s, want %s", sr.Region, az)
		}
		check(t, sr.ID, &attempts)
	})
}

// Unmatchable tags are 422 with the explanation; no free pool
// is 201 PENDING with NO_CAPACITY until a worker brings slots.
func TestUnplaceableAndNoCapacity(t *testing.T) {
	f := newFed(t, fedtest.WithoutGPUWorkers())
	ctx := fedtest.Ctx(t)

	rep := f.Submit(aws, tokAcme, spec{"type": "train", "tags": map[string]string{"gpu": "h100"}}).Want(t, http.StatusUnprocessableEntity)
	e := rep.Err(t)
	if e.Code != apiv1.CodeUnplaceable || e.Explanation == nil || e.Explanation.Outcome != "UNPLACEABLE" {
		t.Fatalf("422 body: %s", rep.Body)
	}
	if len(e.Explanation.Candidates) != 9 {
		t.Fatalf("explanation lists %d pools, want 9", len(e.Explanation.Candidates))
	}
	for _, c := range e.Explanation.Candidates {
		if c.Rejected != "TAG_MISMATCH" || c.Chosen {
			t.Fatalf("candidate %+v, want TAG_MISMATCH", c)
		}
	}

	// a100 pools exist (GCP, Azure) but no worker serves them.
	a100 := spec{"type": "train", "tags": map[string]string{"gpu": "a100"}}
	ex := f.Explain(aws, a100)
	if ex.Outcome != "NO_CAPACITY" || ex.Chosen != nil {
		t.Fatalf("explain without slots: %+v", ex)
	}
	for _, c := range ex.Candidates {
		if c.Pool == poolGPU && c.Region != aws && c.Rejected != "NO_SLOTS" {
			t.Fatalf("candidate %+v, want NO_SLOTS", c)
		}
	}
	sr := f.SubmitOK(aws, tokAcme, a100)
	if sr.State != task.Pending || sr.Pool != nil {
		t.Fatalf("no capacity: %+v, want PENDING with pool null", sr)
	}
	fedtest.Eventually(t, 5*time.Second, "the leader tried and recorded NO_CAPACITY", func() bool {
		tk, _ := f.GetTask(aws, tokAcme, sr.ID)
		return tk.Reason == task.ReasonNoCapacity && fedtest.HasReason(f.Trail(aws, tokAcme, sr.ID), task.ReasonNoCapacity)
	})
	time.Sleep(time.Second) // several placement rounds: still waiting, never dropped
	if tk, _ := f.GetTask(aws, tokAcme, sr.ID); tk.State != task.Pending {
		t.Fatalf("without capacity the task is %s", tk.State)
	}

	// A worker brings one a100 slot in GCP: the task goes there.
	f.Worker(gcp, poolGPU, 1)
	var tk task.Task
	fedtest.Eventually(t, 10*time.Second, "placed once slots appear", func() bool {
		tk, _ = f.GetTask(aws, tokAcme, sr.ID)
		return tk.State == task.Ready && tk.HeldBy == gcp && tk.Pool == poolGPU
	})
	claimed, err := f.R(gcp).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolGPU, Worker: "gpu-worker", N: 1})
	if err != nil || len(claimed) != 1 || claimed[0].ID != sr.ID {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	errs, err := f.R(gcp).Store.Claimer().Complete(ctx, queue.Completion{ID: sr.ID, Token: claimed[0].LeaseToken, Result: "ok"})
	if err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", errs, err)
	}
	tk, _ = f.GetTask(aws, tokAcme, sr.ID)
	if tk.State != task.Success || tk.HeldBy != gcp {
		t.Fatalf("after completion: %+v", tk)
	}
	tr := f.Trail(aws, tokAcme, sr.ID)
	for _, want := range []string{task.ReasonNoCapacity, task.ReasonHandedOff, task.ReasonClaimed, task.ReasonCompleted} {
		if !fedtest.HasReason(tr, want) {
			t.Fatalf("trail lacks %s: %+v", want, tr)
		}
	}
}

// Keyed submits go to the key's home region (rendezvous hashing);
// a repeat anywhere returns the same task; the home down is 503.
func TestKeyedSubmitsRouteToTheKeysHome(t *testing.T) {
	f := newFed(t)
	// A key whose home is GCP, as every server computes it.
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("invoice-%d", i)
		if f.R(aws).Node().KeyHome("acme", k) == gcp {
			key = k
		}
	}
	for _, srv := range fedtest.Regions {
		if h := f.R(srv).Node().KeyHome("acme", key); h != gcp {
			t.Fatalf("%s computes home %s for the key, want %s", srv, h, gcp)
		}
	}
	homes := map[string]int{}
	for i := 0; i < 300; i++ {
		homes[f.R(az).Node().KeyHome("acme", fmt.Sprint(i))]++
	}
	for _, r := range fedtest.Regions {
		if homes[r] < 50 {
			t.Errorf("rendezvous hashing is lopsided: %v", homes)
		}
	}
	sp := spec{"type": "invoice.send", "tags": x86, "idempotency_key": key}
	first := f.SubmitOK(aws, tokAcme, sp)
	if p, _ := task.ParseID(first.ID); p.Region != gcp {
		t.Fatalf("a keyed submit on %s made task %s; its home must be %s", aws, first.ID, gcp)
	}
	if first.Region != az || deref(first.Pool) != poolSpot {
		t.Fatalf("placed on %s/%s, want the cheapest pool", first.Region, deref(first.Pool))
	}
	fedtest.Eventually(t, 5*time.Second, "handed off from its home", func() bool {
		tk, err := f.R(gcp).Store.Get(fedtest.Ctx(t), first.ID)
		return err == nil && tk.State == task.HandedOff
	})
	// Prices move: a repeat still answers where the task went.
	if _, err := f.EtcdCli.Put(fedtest.Ctx(t), "/ax/prices/"+az+"/"+poolSpot, `{"price_per_slot_hour": 0.05}`); err != nil {
		t.Fatal(err)
	}
	fedtest.Eventually(t, 2*time.Second, "the override applied", func() bool {
		ex := f.Explain(gcp, spec{"type": "x", "tags": x86})
		return ex.Chosen != nil && ex.Chosen.Region == gcp
	})
	for _, srv := range fedtest.Regions {
		var again apiv1.SubmitResponse
		f.Submit(srv, tokAcme, sp).Want(t, http.StatusOK).JSON(t, &again)
		// The same body: where the task went, not its home.
		if again.ID != first.ID || !again.Duplicate || again.Region != first.Region || deref(again.Pool) != deref(first.Pool) {
			t.Fatalf("repeat on %s: %+v, want %+v", srv, again, first)
		}
	}
	// Another tenant's same key is another task.
	other := f.SubmitOK(aws, tokGlobex, sp)
	if other.ID == first.ID {
		t.Fatal("two tenants share a key")
	}
	// The same key with another spec is 409 wherever it arrives.
	f.Submit(az, tokAcme, spec{"type": "invoice.send", "tags": x86, "idempotency_key": key, "priority": 1}).Want(t, http.StatusConflict)

	f.R(gcp).Stop()
	fedtest.Eventually(t, 5*time.Second, "GCP gone from the view of AWS", func() bool {
		ri, ok := f.R(aws).Node().View().Region(gcp)
		return !ok || !ri.Healthy
	})
	rep := f.Submit(aws, tokAcme, spec{"type": "invoice.send", "idempotency_key": key + "-new"})
	if h := f.R(aws).Node().KeyHome("acme", key+"-new"); h == gcp {
		rep.Want(t, http.StatusServiceUnavailable)
	}
	rep = f.Submit(aws, tokAcme, sp).Want(t, http.StatusServiceUnavailable)
	if rep.Header.Get("Retry-After") == "" || rep.Err(t).Code != apiv1.CodeUnavailable {
		t.Fatalf("503 without Retry-After or code: %v %s", rep.Header, rep.Body)
	}
	// Unkeyed work still flows.
	f.SubmitOK(aws, tokAcme, spec{"type": "invoice.send", "tags": x86})
}

// A handed-off task whose record the target lost (expired, or its Redis was
// flushed) is answered at once from the home's forwarding record; requests
// never bounce between the regions.
func TestHandedOffTaskLostAtTheTarget(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	sr := f.SubmitOK(aws, tokAcme, spec{"type": "etl.step", "tags": x86})
	if sr.Region != az {
		t.Fatalf("placed on %s", sr.Region)
	}
	fedtest.Eventually(t, 5*time.Second, "handed off", func() bool {
		tk, _ := f.R(aws).Store.Get(ctx, sr.ID)
		return tk.State == task.HandedOff
	})
	if err := f.R(az).Redis.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, srv := range fedtest.Regions {
		start := time.Now()
		tk, rep := f.GetTask(srv, tokAcme, sr.ID)
		rep.Want(t, http.StatusOK)
		if tk.State != task.HandedOff || tk.HandedOffTo != az || tk.HeldBy != aws {
			t.Fatalf("GET on %s: %+v", srv, tk)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("GET on %s took %v", srv, d)
		}
		if tr := f.Trail(srv, tokAcme, sr.ID); !fedtest.HasReason(tr, task.ReasonHandedOff) {
			t.Fatalf("trail on %s: %+v", srv, tr)
		}
	}
	// The holder down: its steps are unknown, so the trail is 503 and
	// retry for every token, not the home's steps alone with 200.
	f.R(az).Stop()
	fedtest.Eventually(t, 5*time.Second, "AZ gone from the view of AWS", func() bool {
		ri, ok := f.R(aws).Node().View().Region(az)
		return !ok || !ri.Healthy
	})
	for _, tok := range []string{tokOperator, tokAcme} {
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/tasks/"+sr.ID+"/trail", tok, nil).Want(t, http.StatusServiceUnavailable)
		if rep.Header.Get("Retry-After") == "" || rep.Err(t).Code != apiv1.CodeUnavailable {
			t.Fatalf("trail with %s, holder down: %v %s", tok, rep.Header, rep.Body)
		}
	}
}
