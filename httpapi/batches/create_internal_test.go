package batches

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/batch"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// fakeBatches creates batches in memory: one per idempotency key.
type fakeBatches struct {
	Batches
	created []*batch.Request
	byKey   map[string]string
}

func (f *fakeBatches) Create(_ context.Context, req *batch.Request, _ batch.SubmitFunc) (*apiv1.BatchStatus, map[int]error, error) {
	if id, ok := f.byKey[req.Tenant+"/"+req.IdempotencyKey]; ok && req.IdempotencyKey != "" {
		return &apiv1.BatchStatus{ID: id, Tenant: req.Tenant, Duplicate: true}, nil, nil
	}
	f.created = append(f.created, req)
	id := "b" + string(rune('0'+len(f.created)))
	f.byKey[req.Tenant+"/"+req.IdempotencyKey] = id
	return &apiv1.BatchStatus{ID: id, Tenant: req.Tenant}, nil, nil
}

func (f *fakeBatches) Validate(req *batch.Request) error {
	return batch.New(nil, nil, batch.Config{}).Validate(req)
}

// fakeFed is two regions, eu (this server's) and us; a key's home is the
// region its key starts with, and a proxied create lands in home.
type fakeFed struct {
	home    *fakeBatches
	proxied []apiv1.BatchCreate
}

func (f *fakeFed) Region() string { return "eu" }
func (f *fakeFed) KeyHome(_, key string) string {
	if strings.HasPrefix(key, "us") {
		return "us"
	}
	return "eu"
}
func (f *fakeFed) FanOutRegions(string, int) ([]string, error) { return []string{"eu", "us"}, nil }
func (f *fakeFed) Proxy(ctx context.Context, region, method, path string, in, out any) error {
	req := *in.(*apiv1.BatchCreate)
	f.proxied = append(f.proxied, req)
	st, _, err := f.home.Create(ctx, &batch.Request{Tenant: req.Tenant, IdempotencyKey: req.IdempotencyKey}, nil)
	if err != nil {
		return err
	}
	*out.(*apiv1.BatchStatus) = *st
	return nil
}

func post(t *testing.T, h *Handlers, p endpoint.Principal, body string) (int, apiv1.BatchStatus) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/batches", strings.NewReader(body))
	w := httptest.NewRecorder()
	if err := h.create(w, r, p); err != nil {
		endpoint.WriteError(w, err)
	}
	var st apiv1.BatchStatus
	_ = json.Unmarshal(w.Body.Bytes(), &st)
	return w.Code, st
}

// A create with an idempotency key is made where its key lives: here when
// the key's home is this region (201, then 200 for the repeat), else sent
// to the home with the caller's tenant (and not sent on again by a server
// that got it from another).
func TestCreateGoesToTheKeysHome(t *testing.T) {
	local, remote := &fakeBatches{byKey: map[string]string{}}, &fakeBatches{byKey: map[string]string{}}
	fed := &fakeFed{home: remote}
	h := New(Config{Batches: local, Fed: fed, MaxPayload: 1 << 10})
	teamA := endpoint.Principal{Name: "a", Role: endpoint.RoleSubmitter, Tenant: "team-a"}
	body := func(key string) string {
		return `{"idempotency_key":"` + key + `","tasks":[{"type":"noop","payload":{"x":1}}]}`
	}
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		code, st := post(t, h, teamA, body("eu-key"))
		if code != want || st.ID != "b1" || st.Duplicate != (i == 1) {
			t.Fatalf("here, call %d: %d %+v, want %d b1", i, code, st, want)
		}
	}
	if len(local.created) != 1 || local.created[0].Tenant != "team-a" || local.created[0].IdempotencyKey != "eu-key" || len(fed.proxied) != 0 {
		t.Fatalf("created here %+v, proxied %d", local.created, len(fed.proxied))
	}
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		code, st := post(t, h, teamA, body("us-key"))
		if code != want || st.ID != "b1" || st.Duplicate != (i == 1) {
			t.Fatalf("at us, call %d: %d %+v, want %d b1", i, code, st, want)
		}
	}
	if len(fed.proxied) != 2 || fed.proxied[0].Tenant != "team-a" || len(remote.created) != 1 || len(local.created) != 1 {
		t.Fatalf("proxied %+v, created at us %d, here %d", fed.proxied, len(remote.created), len(local.created))
	}
	// Another server's request is created here, whatever its key's home.
	cluster := endpoint.Principal{Name: "peer", Role: endpoint.RoleAdmin, Cluster: true}
	if code, _ := post(t, h, cluster, `{"tenant":"team-a","idempotency_key":"us-2","tasks":[{"type":"noop"}]}`); code != http.StatusCreated ||
		len(local.created) != 2 || len(fed.proxied) != 2 {
		t.Fatalf("forwarded create: %d, created here %d, proxied %d", code, len(local.created), len(fed.proxied))
	}
	// Bad input is refused before it is sent anywhere.
	code, _ := post(t, h, teamA, `{"idempotency_key":"us-3","tasks":[{"type":"noop","max_retries":-1}]}`)
	long, _ := post(t, h, teamA, body("us"+strings.Repeat("x", task.MaxIdemKeyLen)))
	if code != http.StatusBadRequest || long != http.StatusBadRequest || len(fed.proxied) != 2 {
		t.Fatalf("bad member %d, long key %d, proxied %d", code, long, len(fed.proxied))
	}
}
