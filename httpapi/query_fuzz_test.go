package httpapi

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/httpapi/endpoint"
)

// isClientError checks that err maps to a 4xx in the one error shape.
func isClientError(t *testing.T, what string, err error) *endpoint.Error {
	t.Helper()
	e := endpoint.ErrorOf(err)
	if e.Status() < 400 || e.Status() >= 500 || e.Code == "" || e.Msg == "" {
		t.Fatalf("%s: %v → %d %q %q, want a 4xx error body", what, err, e.Status(), e.Code, e.Msg)
	}
	return e
}

// FuzzQueryDecoders feeds arbitrary query strings to every listing's
// parameter decoder (GET /v1/tasks, /v1/dlq, /v1/cost): none panics,
// every refusal is a 4xx, and a token of one tenant never gets a query
// that reaches another tenant's tasks, whatever tenant= it sends. The
// stream's decoders have their own (stream.FuzzStreamQueries).
func FuzzQueryDecoders(f *testing.F) {
	for _, s := range []string{"", "tenant=team-b", "state=ready&type=x&limit=5", "limit=0", "limit=-1&offset=9",
		"from=2026-01-01&to=2025-01-01", "group_by=tenant,pool,type", "wait=1m1s", "after=0,$,1-2",
		"after=1-", "after=-1", "after=99999999999999999999-0", "tenant=a&tenant=b", "%zz", "a=%zz", "payload=x",
		"cursor=abc&region=us", "ticket=x&task=y", ";", "after=+1"} {
		for k := range 4 {
			f.Add(uint8(k), s)
		}
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, kind uint8, raw string) {
		scoped := Principal{Name: "ci", Role: RoleSubmitter, Tenant: "team-a"}
		if kind&0x80 != 0 {
			scoped.Role = RoleOperator
		}
		var err error
		tenant := "team-a"
		switch kind % 4 {
		case 0:
			tq, e := parseTaskQuery(raw, scoped)
			tenant, err = tq.Filter.Tenant, e
		case 1:
			dq, e := parseDLQQuery(raw, scoped)
			tenant, err = dq.Tenant, e
		case 2:
			cq, e := parseCostQuery(raw, scoped, now)
			tenant, err = cq.Tenant, e
		case 3:
			_, err = parseTaskQuery(raw, Principal{Name: "ops", Role: RoleOperator})
		}
		if err != nil {
			isClientError(t, "query "+raw, err)
			return
		}
		if tenant != "team-a" {
			t.Fatalf("query %q by a token of team-a reaches tenant %q", raw, tenant)
		}
	})
}
