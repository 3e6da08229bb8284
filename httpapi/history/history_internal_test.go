package history

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// The ring keeps its last Keep samples; GET /v1/history answers those of
// the minutes asked, the tenant figures summed for a token of every tenant
// and its own for a tenant's token, whose asking for another is 403.
func TestRingKeepsAndScopes(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	n := 0
	r := New(Config{Keep: 3, Now: func() time.Time { return now }, Look: func(context.Context) Sample {
		n++
		return Sample{Regions: []apiv1.HistoryRegion{{Name: "us-east-1", Ready: n}}, Succeeded: 10 * n, Counted: n != 2,
			Submitted: map[string]float64{"team-a": float64(n), "team-b": 100}, Spend: map[string]float64{"team-a": 0.5, "team-b": 2}}
	}})
	for range 4 {
		r.Look(context.Background())
		now = now.Add(5 * time.Minute)
	}
	get := func(p endpoint.Principal, query string) (apiv1.HistoryResponse, error) {
		w := httptest.NewRecorder()
		var resp apiv1.HistoryResponse
		err := r.get(w, httptest.NewRequest("GET", "/v1/history"+query, nil), p)
		if err == nil {
			if e := json.Unmarshal(w.Body.Bytes(), &resp); e != nil {
				t.Fatal(e)
			}
		}
		return resp, err
	}
	all, err := get(endpoint.Principal{Role: endpoint.RoleOperator}, "")
	if err != nil || len(all.Samples) != 3 || all.EverySeconds != 15 {
		t.Fatalf("every tenant: %+v %v; want the last 3 samples", all, err)
	}
	first := all.Samples[0]
	if first.Regions[0].Ready != 2 || first.Submitted != 102 || *first.SpendUSD != 2.5 || first.Succeeded != nil {
		t.Fatalf("first kept sample %+v: want the second look, both tenants summed, no count (not read)", first)
	}
	if s := all.Samples[2]; s.Succeeded == nil || *s.Succeeded != 40 {
		t.Fatalf("last sample %+v", s)
	}
	own, err := get(endpoint.Principal{Role: endpoint.RoleSubmitter, Tenant: "team-a"}, "?minutes=10")
	if err != nil || len(own.Samples) != 2 || own.Tenant != "team-a" || own.Samples[1].Submitted != 4 || *own.Samples[1].SpendUSD != 0.5 {
		t.Fatalf("team-a, 10 minutes: %+v %v; want its own figures of the last two looks", own, err)
	}
	var ee *endpoint.Error
	if _, err := get(endpoint.Principal{Role: endpoint.RoleSubmitter, Tenant: "team-a"}, "?tenant=team-b"); !errors.As(err, &ee) || ee.Field != "tenant" {
		t.Fatalf("team-a asking for team-b: %v", err)
	}
	for _, q := range []string{"?minutes=0", "?minutes=61", "?minutes=x", "?colour=red"} {
		if _, err := get(endpoint.Principal{Role: endpoint.RoleOperator}, q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}
