package httpapi

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// isClientError checks that err maps to a 4xx in the one error shape.
func isClientError(t *testing.T, what string, err error) *apiError {
	t.Helper()
	e := toAPIError(err)
	if e.status() < 400 || e.status() >= 500 || e.code == "" || e.msg == "" {
		t.Fatalf("%s: %v → %d %q %q, want a 4xx error body", what, err, e.status(), e.code, e.msg)
	}
	return e
}

// FuzzQueryDecoders feeds arbitrary query strings to every listing's
// parameter decoder (GET /v1/tasks, /v1/dlq, /v1/cost, /v1/events, the
// stream's) and arbitrary stream tickets to their redeemer: none panics,
// every refusal is a 4xx, and a token of one tenant never gets a query
// that reaches another tenant's tasks, whatever tenant= it sends. An
// events after= that decodes is one XREAD takes (a malformed id was
// Redis's error, a 503). Only tickets this server issued redeem, once.
func FuzzQueryDecoders(f *testing.F) {
	for _, s := range []string{"", "tenant=team-b", "state=ready&type=x&limit=5", "limit=0", "limit=-1&offset=9",
		"from=2026-01-01&to=2025-01-01", "group_by=tenant,pool,type", "wait=1m1s", "after=0,$,1-2",
		"after=1-", "after=-1", "after=99999999999999999999-0", "tenant=a&tenant=b", "%zz", "a=%zz", "payload=x",
		"cursor=abc&region=us", "ticket=x&task=y", ";", "after=+1"} {
		for k := range 6 {
			f.Add(uint8(k), s)
		}
	}
	issued := newTickets("cluster-secret")
	valid, _ := issued.issue(Principal{Name: "ci", Role: RoleSubmitter, Tenant: "team-a"})
	for _, s := range []string{valid, valid + "x", "x" + valid, strings.Replace(valid, ".", "", 1), ".", "", "a.b",
		strings.ToUpper(valid), valid[:len(valid)/2]} {
		f.Add(uint8(6), s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, kind uint8, raw string) {
		scoped := Principal{Name: "ci", Role: RoleSubmitter, Tenant: "team-a"}
		if kind&0x80 != 0 {
			scoped.Role = RoleOperator
		}
		var err error
		tenant := "team-a"
		switch kind % 7 {
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
			v, e := url.ParseQuery(raw)
			if e != nil {
				return // the server answers 400 before the handler
			}
			var after []string
			_, after, err = parseEventsQuery(v)
			if err == nil {
				for _, id := range after {
					ms, seq, _ := strings.Cut(id, "-")
					if strings.ContainsAny(ms+seq, "+- ") || (id != "" && id != "$" && ms == "") {
						t.Fatalf("after id %q accepted", id)
					}
				}
			}
		case 4:
			_, err = parseQuery(raw, "ticket", "task")
		case 5:
			_, err = parseTaskQuery(raw, Principal{Name: "ops", Role: RoleOperator})
		case 6:
			k := newTickets("cluster-secret") // every run its own used set
			p, e := k.redeem(raw)
			if e != nil {
				if e != errBadTicket {
					t.Fatalf("ticket %q: %+v, want errBadTicket", raw, e)
				}
				return
			}
			// Only issued tickets verify (each fuzzing process issues its
			// own seed): all of them are team-a's submitter's.
			if p.Tenant != "team-a" || p.Role != RoleSubmitter || p.Name != "ci" {
				t.Fatalf("ticket %q redeemed as %+v", raw, p)
			}
			if _, again := k.redeem(raw); again == nil {
				t.Fatalf("ticket %q redeemed twice", raw)
			}
			return
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
