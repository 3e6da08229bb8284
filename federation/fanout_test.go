package federation_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// dead makes one dead letter in a region: a task of typ for token's tenant,
// claimed there and failed for good. It returns the task's id. Failures are
// a few ms apart, so the dead letters' order is the order of the calls.
func (f *fed) dead(regionName, token, typ string) string {
	f.T.Helper()
	ctx := fedtest.Ctx(f.T)
	sr := f.SubmitOK(regionName, token, spec{"type": typ, "tags": x86, "regions": []string{regionName}, "priority": 1, "max_retries": 0})
	st := f.R(regionName).Store
	held, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: deref(sr.Pool), Worker: "w-fanout", N: 1})
	if err != nil || len(held) != 1 || held[0].ID != sr.ID {
		f.T.Fatalf("claim in %s: %+v %v", regionName, held, err)
	}
	s, _, err := st.Claimer().Fail(ctx, queue.Failure{ID: sr.ID, Token: held[0].LeaseToken, Error: "boom in " + regionName})
	if err != nil || s != task.Failed {
		f.T.Fatalf("fail: %s %v", s, err)
	}
	time.Sleep(3 * time.Millisecond)
	return sr.ID
}

// forwarded sends a request as another server would: with X-Ax-Forwarded.
func (f *fed) forwarded(method, url, token string, body any) reply {
	f.T.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		f.T.Fatal(err)
	}
	req.Header.Set(apiv1.HeaderForwarded, "1")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.HTTP.Do(req)
	if err != nil {
		f.T.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}
}

func ids(ts []*task.Task) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func outcomes(l []apiv1.RegionOutcome) map[string]int {
	m := map[string]int{}
	for _, o := range l {
		if o.Error != nil {
			m[o.Region] = -1
			continue
		}
		m[o.Region] = o.Count
	}
	return m
}

// Dead letters of every region, listed from any region's API: merged
// newest first, paged by a cursor that crosses regions, filtered by region
// and tenant, with the regions that do not answer named.
func TestFanoutDeadLetters(t *testing.T) {
	f := newFed(t)
	// acme's dead letters alternate between AWS and GCP; then globex's two.
	held := map[string]string{}
	var order []string // oldest first
	add := func(regionName, token, typ string) string {
		id := f.dead(regionName, token, typ)
		held[id] = regionName
		order = append(order, id)
		return id
	}
	var acme []string
	for i := 0; i < 3; i++ {
		acme = append(acme, add(aws, tokAcme, "fan.dead"), add(gcp, tokAcme, "fan.dead"))
	}
	globex := []string{add(gcp, tokGlobex, "fan.dead"), add(aws, tokGlobex, "fan.other")}
	newest := func(of []string) []string { c := slices.Clone(of); slices.Reverse(c); return c }

	list := func(t *testing.T, regionName, token, query string) (apiv1.TaskList, reply) {
		t.Helper()
		rep := f.Call(http.MethodGet, f.R(regionName).URL()+"/v1/dlq?"+query, token, nil).Want(t, http.StatusOK)
		var l apiv1.TaskList
		rep.JSON(t, &l)
		return l, rep
	}

	t.Run("every region's, newest first, from a third region", func(t *testing.T) {
		l, rep := list(t, az, tokOperator, "")
		if diff := cmp.Diff(newest(order), ids(l.Tasks)); diff != "" {
			t.Fatalf("order (-want +got):\n%s", diff)
		}
		for _, tk := range l.Tasks {
			if tk.HeldBy != held[tk.ID] || tk.State != task.Failed || tk.LastError != "boom in "+held[tk.ID] {
				t.Fatalf("entry %+v", tk)
			}
		}
		if diff := cmp.Diff(map[string]int{aws: 4, az: 0, gcp: 4}, outcomes(l.Regions)); diff != "" {
			t.Fatalf("per-region counts (-want +got):\n%s", diff)
		}
		if l.NextCursor != "" || !strings.Contains(string(rep.Body), `"unavailable":[]`) {
			t.Fatalf("a complete listing: next %q, body %s", l.NextCursor, rep.Body)
		}
		l, _ = list(t, az, tokOperator, "type=fan.dead")
		if diff := cmp.Diff(newest(append(slices.Clone(acme), globex[0])), ids(l.Tasks)); diff != "" {
			t.Fatalf("type filter (-want +got):\n%s", diff)
		}
	})

	t.Run("the cursor pages through every region, each entry once", func(t *testing.T) {
		for _, limit := range []string{"1", "3", "8"} {
			var got []string
			pages, cursor := 0, ""
			for {
				q := url.Values{"limit": {limit}}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				l, _ := list(t, az, tokOperator, q.Encode())
				got = append(got, ids(l.Tasks)...)
				pages++
				if l.NextCursor == "" {
					break
				}
				if pages > 20 {
					t.Fatalf("limit %s: no end", limit)
				}
				cursor = l.NextCursor
			}
			if diff := cmp.Diff(newest(order), got); diff != "" {
				t.Fatalf("limit %s: pages (-want +got):\n%s", limit, diff)
			}
		}
		// A dead letter that arrives between pages does not shift them:
		// the cursor is a place in the order, not a position.
		first, _ := list(t, aws, tokOperator, "limit=3")
		late := add(az, tokAcme, "fan.dead")
		acme = append(acme, late)
		rest, _ := list(t, aws, tokOperator, "limit=10&cursor="+url.QueryEscape(first.NextCursor))
		if diff := cmp.Diff(newest(order[:len(order)-1]), append(ids(first.Tasks), ids(rest.Tasks)...)); diff != "" {
			t.Fatalf("pages around a new dead letter (-want +got):\n%s", diff)
		}
		l, _ := list(t, gcp, tokOperator, "limit=1")
		if len(l.Tasks) != 1 || l.Tasks[0].ID != late || l.Tasks[0].HeldBy != az {
			t.Fatalf("a new listing starts with the newest: %+v", l.Tasks)
		}
		// offset= still skips, over the merged order.
		l, _ = list(t, gcp, tokOperator, "offset=2&limit=3")
		if diff := cmp.Diff(newest(order)[2:5], ids(l.Tasks)); diff != "" {
			t.Fatalf("offset (-want +got):\n%s", diff)
		}
	})

	t.Run("region= lists one region, routed there", func(t *testing.T) {
		l, _ := list(t, az, tokOperator, "region="+gcp)
		var want []string
		for _, id := range newest(order) {
			if held[id] == gcp {
				want = append(want, id)
			}
		}
		if diff := cmp.Diff(want, ids(l.Tasks)); diff != "" {
			t.Fatalf("region=%s (-want +got):\n%s", gcp, diff)
		}
		if diff := cmp.Diff(map[string]int{gcp: 4}, outcomes(l.Regions)); diff != "" {
			t.Fatalf("regions (-want +got):\n%s", diff)
		}
		l, _ = list(t, aws, tokOperator, "region="+az)
		if len(l.Tasks) != 1 || l.Tasks[0].HeldBy != az {
			t.Fatalf("region=%s: %+v", az, ids(l.Tasks))
		}
	})

	t.Run("a tenant sees its own dead letters in every region", func(t *testing.T) {
		for _, srv := range fedtest.Regions {
			l, _ := list(t, srv, tokAcme, "")
			if diff := cmp.Diff(newest(acme), ids(l.Tasks)); diff != "" {
				t.Fatalf("acme from %s (-want +got):\n%s", srv, diff)
			}
			// Asking for another tenant does not widen the scope: it is
			// refused, naming tenant (not quietly acme's own).
			rep := f.Call(http.MethodGet, f.R(srv).URL()+"/v1/dlq?tenant=globex", tokAcme, nil).Want(t, http.StatusForbidden)
			if e := rep.Err(t); e.Field != "tenant" || e.Code != apiv1.CodeForbidden {
				t.Fatalf("acme asking for globex from %s: %+v", srv, e)
			}
			l, _ = list(t, srv, tokGlobex, "")
			if diff := cmp.Diff(newest(globex), ids(l.Tasks)); diff != "" {
				t.Fatalf("globex from %s (-want +got):\n%s", srv, diff)
			}
		}
		// An operator of every tenant filters by tenant.
		l, _ := list(t, aws, tokOperator, "tenant=globex")
		if diff := cmp.Diff(newest(globex), ids(l.Tasks)); diff != "" {
			t.Fatalf("operator, tenant=globex (-want +got):\n%s", diff)
		}
	})

	t.Run("400 names the field", func(t *testing.T) {
		wrongVersion := base64.RawURLEncoding.EncodeToString([]byte("2:1:" + acme[0]))
		notAnID := base64.RawURLEncoding.EncodeToString([]byte("1:1:nope"))
		for _, tc := range []struct{ query, field string }{
			{"cursor=%%%", "cursor"}, {"cursor=%25%25", "cursor"}, {"cursor=" + wrongVersion, "cursor"}, {"cursor=" + notAnID, "cursor"},
			{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"offset=-1", "offset"},
			{"typ=fan.dead", "typ"}, {"region=mars-1", "region"},
		} {
			rep := f.Call(http.MethodGet, f.R(az).URL()+"/v1/dlq?"+tc.query, tokOperator, nil).Want(t, http.StatusBadRequest)
			if e := rep.Err(t); e.Code != apiv1.CodeInvalid || e.Field != tc.field {
				t.Fatalf("%s: %s", tc.query, rep.Body)
			}
		}
	})

	t.Run("a forwarded request lists its own region only", func(t *testing.T) {
		var l apiv1.TaskList
		f.forwarded(http.MethodGet, f.R(gcp).URL()+"/v1/dlq", tokCluster, nil).Want(t, http.StatusOK).JSON(t, &l)
		for _, tk := range l.Tasks {
			if tk.HeldBy != gcp {
				t.Fatalf("a forwarded listing went on to %s", tk.HeldBy)
			}
		}
		if len(l.Tasks) != 4 || len(l.Regions) != 1 || l.Regions[0].Region != gcp {
			t.Fatalf("forwarded: %d tasks, regions %+v", len(l.Tasks), l.Regions)
		}
		// The tenant the calling server passes narrows the cluster token's view.
		f.forwarded(http.MethodGet, f.R(gcp).URL()+"/v1/dlq?tenant=globex", tokCluster, nil).Want(t, http.StatusOK).JSON(t, &l)
		if diff := cmp.Diff([]string{globex[0]}, ids(l.Tasks)); diff != "" {
			t.Fatalf("forwarded with tenant (-want +got):\n%s", diff)
		}
		f.forwarded(http.MethodGet, f.R(gcp).URL()+"/v1/dlq?region="+aws, tokCluster, nil).Want(t, http.StatusNotFound)
	})

	t.Run("a region that fails is named; the others still answer", func(t *testing.T) {
		// GCP's server drops every fanned-out listing without an answer.
		drop := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.Header.Get(apiv1.HeaderForwarded) != "" && r.URL.Path == "/v1/dlq" {
				if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
					c.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		}
		f.R(gcp).Intercept.Store(&drop)
		l, _ := list(t, az, tokOperator, "")
		f.R(gcp).Intercept.Store(nil)
		var want []string
		for _, id := range newest(order) {
			if held[id] != gcp {
				want = append(want, id)
			}
		}
		if diff := cmp.Diff(want, ids(l.Tasks)); diff != "" {
			t.Fatalf("without GCP (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{gcp}, l.Unavailable); diff != "" {
			t.Fatalf("unavailable (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]int{aws: 4, az: 1, gcp: -1}, outcomes(l.Regions)); diff != "" {
			t.Fatalf("regions (-want +got):\n%s", diff)
		}
	})

	// Last: it stops GCP's server.
	t.Run("a stopped region is named; the others still answer", func(t *testing.T) {
		f.R(gcp).Stop()
		for _, srv := range []string{aws, az} {
			l, _ := list(t, srv, tokAcme, "")
			var want []string
			for _, id := range newest(acme) {
				if held[id] != gcp {
					want = append(want, id)
				}
			}
			if diff := cmp.Diff(want, ids(l.Tasks)); diff != "" {
				t.Fatalf("from %s without GCP (-want +got):\n%s", srv, diff)
			}
			if diff := cmp.Diff([]string{gcp}, l.Unavailable); diff != "" {
				t.Fatalf("from %s: unavailable (-want +got):\n%s", srv, diff)
			}
			for _, o := range l.Regions {
				if (o.Region == gcp) != (o.Error != nil) {
					t.Fatalf("from %s: outcome %+v", srv, o)
				}
			}
		}
		// Asked for GCP alone: nothing to return, so 503.
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq?region="+gcp, tokOperator, nil).Want(t, http.StatusServiceUnavailable)
		// It names the region, and no idempotency key (there is none here).
		if e := rep.Err(t); e.Code != apiv1.CodeUnavailable || !strings.Contains(e.Message, "region unavailable: "+gcp) || strings.Contains(e.Message, "key") {
			t.Fatal(string(rep.Body))
		}
	})
}

// Bulk cancel from one region's API cancels matching PENDING and READY
// tasks in every region and counts them per region.
func TestFanoutBulkCancel(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	type sent struct{ id, region string }
	submit := func(regionName, token, typ string, extra spec) sent {
		sp := spec{"type": typ, "tags": x86, "regions": []string{regionName}}
		for k, v := range extra {
			sp[k] = v
		}
		return sent{f.SubmitOK(regionName, token, sp).ID, regionName}
	}
	var cancelMe, keep []sent
	for _, r := range fedtest.Regions {
		cancelMe = append(cancelMe, submit(r, tokAcme, "fan.cancel", nil), submit(r, tokAcme, "fan.cancel", nil))
		keep = append(keep, submit(r, tokAcme, "fan.keep", nil))
	}
	delayed := submit(gcp, tokAcme, "fan.cancel", spec{"delay": "1h"})
	theirs := submit(az, tokGlobex, "fan.cancel", nil)
	state := func(tk sent) task.State {
		got, err := f.R(tk.region).Store.Get(ctx, tk.id)
		if err != nil {
			t.Fatalf("%s in %s: %v", tk.id, tk.region, err)
		}
		return got.State
	}
	waiting := func(typ string) int {
		n := 0
		for _, r := range fedtest.Regions {
			_ = f.R(r).Store.Tasks().Waiting(ctx, queue.Filter{Type: typ}, func(ts []*task.Task) error { n += len(ts); return nil })
		}
		return n
	}
	cancel := func(t *testing.T, regionName, token string, body any) (apiv1.BulkCancelResponse, reply) {
		t.Helper()
		rep := f.Call(http.MethodPost, f.R(regionName).URL()+"/v1/tasks/cancel", token, body).Want(t, http.StatusOK)
		var bc apiv1.BulkCancelResponse
		rep.JSON(t, &bc)
		return bc, rep
	}

	t.Run("400 names the field and changes nothing", func(t *testing.T) {
		for _, tc := range []struct{ body, field string }{
			{`{"typ":"fan.cancel"}`, "typ"},
			{`{"type":"fan.cancel","state":"DONE"}`, "state"},
			{`{"type":"fan.cancel","state":"RUNNING"}`, "state"},
			{`{"type":"fan.cancel","region":"mars-1"}`, "region"},
			{`{"region":"` + gcp + `"}`, "type"},
			{`{"type":"fan.cancel","region":7}`, "region"},
		} {
			rep := f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/cancel", tokOperator, tc.body).Want(t, http.StatusBadRequest)
			if e := rep.Err(t); e.Code != apiv1.CodeInvalid || e.Field != tc.field {
				t.Fatalf("%s: %s", tc.body, rep.Body)
			}
		}
		if n := waiting("fan.cancel"); n != 8 {
			t.Fatalf("%d fan.cancel tasks waiting after refused requests, want 8", n)
		}
		f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/cancel", tokAcme, spec{"type": "fan.cancel"}).Want(t, http.StatusForbidden)
	})

	t.Run("state and region filters", func(t *testing.T) {
		bc, _ := cancel(t, aws, tokOperator, spec{"type": "fan.cancel", "state": "PENDING", "region": gcp})
		if bc.Canceled != 1 || len(bc.Unavailable) != 0 {
			t.Fatalf("PENDING in %s: %+v", gcp, bc)
		}
		if diff := cmp.Diff(map[string]int{gcp: 1}, outcomes(bc.Regions)); diff != "" {
			t.Fatalf("regions (-want +got):\n%s", diff)
		}
		if state(delayed) != task.Canceled || waiting("fan.cancel") != 7 {
			t.Fatalf("the delayed task is %s; %d waiting", state(delayed), waiting("fan.cancel"))
		}
	})

	t.Run("a tenant's operator cancels its tenant's tasks in every region", func(t *testing.T) {
		bc, _ := cancel(t, gcp, tokGlobexOps, spec{"type": "fan.cancel"})
		if diff := cmp.Diff(map[string]int{aws: 0, az: 1, gcp: 0}, outcomes(bc.Regions)); diff != "" || bc.Canceled != 1 {
			t.Fatalf("globex's operator: %+v (-want +got):\n%s", bc, diff)
		}
		if state(theirs) != task.Canceled {
			t.Fatalf("globex's task: %s", state(theirs))
		}
	})

	t.Run("every region's matching tasks, counted per region", func(t *testing.T) {
		bc, rep := cancel(t, aws, tokOperator, spec{"type": "fan.cancel", "tenant": "acme"})
		if diff := cmp.Diff(map[string]int{aws: 2, az: 2, gcp: 2}, outcomes(bc.Regions)); diff != "" || bc.Canceled != 6 {
			t.Fatalf("%s (-want +got):\n%s", rep.Body, diff)
		}
		if !strings.Contains(string(rep.Body), `"unavailable":[]`) {
			t.Fatalf("no unavailable list: %s", rep.Body)
		}
		for _, tk := range cancelMe {
			if state(tk) != task.Canceled {
				t.Fatalf("%s in %s: %s", tk.id, tk.region, state(tk))
			}
		}
		for _, tk := range keep {
			if state(tk) != task.Ready {
				t.Fatalf("a task the filter does not match: %s in %s is %s", tk.id, tk.region, state(tk))
			}
		}
		// The trail names the operator in every region, not the cluster token.
		for _, tk := range cancelMe {
			tr := f.Trail(tk.region, tokAcme, tk.id)
			if last := tr[len(tr)-1]; last.To != task.Canceled || last.By != "oncall" {
				t.Fatalf("%s in %s: last step %+v", tk.id, tk.region, last)
			}
		}
		bc, _ = cancel(t, az, tokOperator, spec{"type": "fan.cancel"})
		if bc.Canceled != 0 {
			t.Fatalf("again: %+v", bc)
		}
	})

	t.Run("a forwarded request cancels in its own region only", func(t *testing.T) {
		var bc apiv1.BulkCancelResponse
		f.forwarded(http.MethodPost, f.R(az).URL()+"/v1/tasks/cancel?on_behalf_of=jane", tokCluster, spec{"type": "fan.keep"}).
			Want(t, http.StatusOK).JSON(t, &bc)
		if diff := cmp.Diff(map[string]int{az: 1}, outcomes(bc.Regions)); diff != "" || bc.Canceled != 1 {
			t.Fatalf("forwarded: %+v (-want +got):\n%s", bc, diff)
		}
		// on_behalf_of and the hop count count from the cluster token only:
		// an operator's forged hop header is ignored, the cancel fans out.
		f.forwarded(http.MethodPost, f.R(aws).URL()+"/v1/tasks/cancel?on_behalf_of=mallory", tokOperator, spec{"type": "fan.keep"}).
			Want(t, http.StatusOK).JSON(t, &bc)
		if bc.Canceled != 2 || len(bc.Regions) != len(fedtest.Regions) {
			t.Fatalf("forwarded by an operator: %+v", bc)
		}
		for _, tk := range keep {
			tr := f.Trail(tk.region, tokAcme, tk.id)
			last := tr[len(tr)-1]
			switch tk.region {
			case az:
				if last.To != task.Canceled || last.By != "jane" {
					t.Fatalf("cancelled for jane: %+v", last)
				}
			default:
				if last.To != task.Canceled || last.By != "oncall" {
					t.Fatalf("cancelled by the operator: %+v", last)
				}
			}
		}
	})

	// Last: it stops GCP's server.
	t.Run("a stopped region is named; the others still cancel", func(t *testing.T) {
		var late []sent
		for _, r := range fedtest.Regions {
			late = append(late, submit(r, tokAcme, "fan.late", nil))
		}
		f.R(gcp).Stop()
		bc, _ := cancel(t, aws, tokOperator, spec{"type": "fan.late"})
		if bc.Canceled != 2 || !slices.Equal(bc.Unavailable, []string{gcp}) {
			t.Fatalf("without GCP: %+v", bc)
		}
		if diff := cmp.Diff(map[string]int{aws: 1, az: 1, gcp: -1}, outcomes(bc.Regions)); diff != "" {
			t.Fatalf("regions (-want +got):\n%s", diff)
		}
		for _, tk := range late {
			if want := map[bool]task.State{true: task.Ready, false: task.Canceled}[tk.region == gcp]; state(tk) != want {
				t.Fatalf("%s's task: %s, want %s", tk.region, state(tk), want)
			}
		}
		rep := f.Call(http.MethodPost, f.R(az).URL()+"/v1/tasks/cancel", tokOperator, spec{"type": "fan.late", "region": gcp}).
			Want(t, http.StatusServiceUnavailable)
		if rep.Err(t).Code != apiv1.CodeUnavailable {
			t.Fatal(string(rep.Body))
		}
	})
}
