package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
)

// fuzzEnv is one region's API over a real Redis and etcd, with nothing
// running in the background: no cell (its pools' figures are written to
// etcd once, by the test, as a leader would publish them), so the store
// changes only through the requests the fuzzer sends.
type fuzzEnv struct {
	api   *httpapi.API
	store *store.Store
}

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	e := testenv.StartEtcd(tb)
	rd := testenv.StartRedis(tb)
	cli := e.Client()
	st, err := store.New(rd.Client(), queue.Options{Region: aws})
	if err != nil {
		tb.Fatal(err)
	}
	figs := region.Figures{Region: aws, API: "http://127.0.0.1:1", Leader: "fuzz", UpdatedAt: time.Now().UTC(),
		Pools: []region.PoolFigures{
			{Name: poolSpot, Tags: map[string]string{"arch": "x86", "class": "spot"}, Slots: 8,
				QueueCapacity: 1 << 30, PricePerSlotHour: fedtest.PriceOf(aws, poolSpot), Spot: true},
			// Two tasks saturate it: the fuzzer reaches 429 too.
			{Name: poolGPU, Tags: map[string]string{"gpu": "l4"}, Slots: 1, QueueCapacity: 2, PricePerSlotHour: fedtest.PriceOf(aws, poolGPU)},
		}}
	b, _ := json.Marshal(figs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/ax/regions/"+aws, string(b)); err != nil {
		tb.Fatal(err)
	}
	pcfg := placement.DefaultConfig()
	pcfg.StaleAfter = 24 * time.Hour // the figures are written once
	quiet := slog.New(slog.DiscardHandler)
	view := view.New(cli, "/ax/", pcfg, time.Second, quiet)
	tb.Cleanup(view.Close)
	fedtest.Eventually(tb, 10*time.Second, "the view holds the region", func() bool {
		ri, ok := view.Region(aws)
		return ok && ri.Healthy
	})
	n, err := federation.NewNode(federation.Config{Region: aws, Regions: []string{aws}, ClusterToken: tokCluster, Placement: pcfg, Logger: quiet}, st, view, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	auth := &httpapi.Auth{Enabled: true, ClusterToken: tokCluster, Tokens: []httpapi.Token{
		{Name: "acme-ci", SHA256: httpapi.HashToken(tokAcme), Role: httpapi.RoleSubmitter, Tenant: "acme"}}}
	return &fuzzEnv{api: httpapi.New(n, httpapi.Config{Auth: auth, Pools: []string{poolSpot, poolGPU}}), store: st}
}

// queued is every task the region holds (nothing moves them here).
func (e *fuzzEnv) queued(t *testing.T) int {
	t.Helper()
	c, err := e.store.Tasks().Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.Pending + c.Ready + c.Running + c.Succeeded + c.Canceled + c.Failed
}

// FuzzSubmitDecode posts arbitrary bodies to POST /v1/tasks (batch false)
// and POST /v1/tasks/batch (batch true): never a 5xx, never a panic, every
// error in the one shape, and a 4xx never changes what the store holds —
// the store gains exactly the tasks answered 201.
func FuzzSubmitDecode(f *testing.F) {
	env := newFuzzEnv(f)
	// Seeds: testdata/fuzz/FuzzSubmitDecode (valid, keyed, delayed, saturating,
	// unplaceable, malformed, batches of each).
	f.Fuzz(func(t *testing.T, batch bool, body []byte) {
		path := "/v1/tasks"
		if batch {
			path = "/v1/tasks/batch"
		}
		before := env.queued(t)
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokAcme)
		rec := httptest.NewRecorder()
		env.api.ServeHTTP(rec, req)
		after := env.queued(t)
		rep := reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		if rep.Status >= 500 {
			t.Fatalf("%d for %q: %s", rep.Status, body, rep.Body)
		}
		if rep.Status >= 400 {
			fedtest.CheckErrorShape(t, "POST "+path, rep)
			if after != before {
				t.Fatalf("%d changed the store: %d tasks before, %d after, for %q", rep.Status, before, after, body)
			}
			return
		}
		created := 0
		switch {
		case !batch && rep.Status == http.StatusCreated:
			created = 1
		case !batch && rep.Status == http.StatusOK: // an idempotent repeat
			var sr apiv1.SubmitResponse
			rep.JSON(t, &sr)
			if !sr.Duplicate || sr.ID == "" {
				t.Fatalf("200 that is no repeat: %s", rep.Body)
			}
		case batch && rep.Status == http.StatusOK:
			var br apiv1.BatchResponse
			rep.JSON(t, &br)
			if br.Accepted+br.Rejected != len(br.Results) {
				t.Fatalf("batch counts: %s", rep.Body)
			}
			for i, it := range br.Results {
				if it.Status >= 500 || (it.Error == nil) == (it.Task == nil) {
					t.Fatalf("item %d: %+v", i, it)
				}
				if it.Error != nil && (it.Error.Code == "" || it.Error.Message == "" ||
					it.Error.Field != "" && !strings.HasPrefix(it.Error.Field, "tasks[")) {
					t.Fatalf("item %d error: %+v", i, it.Error)
				}
				if it.Status == http.StatusCreated {
					created++
				}
			}
		default:
			t.Fatalf("unexpected %d: %s", rep.Status, rep.Body)
		}
		if after-before != created {
			t.Fatalf("%d answered created, the store gained %d, for %q", created, after-before, body)
		}
	})
}
