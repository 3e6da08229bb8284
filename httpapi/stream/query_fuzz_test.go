package stream

import (
	"net/url"
	"strings"
	"testing"

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

// FuzzStreamQueries feeds arbitrary query strings to GET /v1/events's and
// GET /v1/stream's parameter decoders and arbitrary stream tickets to their
// redeemer: none panics, every refusal is a 4xx. An events after= that
// decodes is one XREAD takes (a malformed id was Redis's error, a 503).
// Only tickets this server issued redeem, once.
func FuzzStreamQueries(f *testing.F) {
	for _, s := range []string{"", "tenant=team-b", "state=ready&type=x&limit=5", "limit=0", "limit=-1&offset=9",
		"from=2026-01-01&to=2025-01-01", "group_by=tenant,pool,type", "wait=1m1s", "after=0,$,1-2",
		"after=1-", "after=-1", "after=99999999999999999999-0", "tenant=a&tenant=b", "%zz", "a=%zz", "payload=x",
		"cursor=abc&region=us", "ticket=x&task=y", ";", "after=+1"} {
		for k := range 2 {
			f.Add(uint8(k), s)
		}
	}
	issued := newTickets("cluster-secret")
	valid, _ := issued.issue(endpoint.Principal{Name: "ci", Role: endpoint.RoleSubmitter, Tenant: "team-a"})
	for _, s := range []string{valid, valid + "x", "x" + valid, strings.Replace(valid, ".", "", 1), ".", "", "a.b",
		strings.ToUpper(valid), valid[:len(valid)/2]} {
		f.Add(uint8(2), s)
	}
	f.Fuzz(func(t *testing.T, kind uint8, raw string) {
		var err error
		switch kind % 3 {
		case 0:
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
		case 1:
			_, err = endpoint.ParseQuery(raw, "ticket", "task")
		case 2:
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
			if p.Tenant != "team-a" || p.Role != endpoint.RoleSubmitter || p.Name != "ci" {
				t.Fatalf("ticket %q redeemed as %+v", raw, p)
			}
			if _, again := k.redeem(raw); again == nil {
				t.Fatalf("ticket %q redeemed twice", raw)
			}
			return
		}
		if err != nil {
			isClientError(t, "query "+raw, err)
		}
	})
}
