package dag

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// testDAGList: GET /v1/dags through a region that is home to none of the
// runs lists every region's, newest first, a tenant's own only, paged by a
// cursor across regions without repeats; filters by name and state.
func testDAGList(t *testing.T, e *dagEnv) {
	us, eu, ap := e.r("us-east-1").any(), e.r("eu-west-1").any(), e.r("ap-south-1").any()
	idle := func(name string) map[string]any {
		n := dagNode("wait", "ok", "")
		n["task"].(map[string]any)["delay"] = "1h" // RUNNING for the test's whole life
		return map[string]any{"name": name, "nodes": []map[string]any{n}}
	}
	var want []string // acme's new runs, oldest first
	for _, c := range []struct {
		s    *dagServer
		tok  string
		name string
	}{{us, dagTokAcme, "list-a"}, {eu, dagTokAcme, "list-b"}, {us, dagTokGlobex, "list-g"}, {us, dagTokAcme, "list-a"}} {
		var st apiv1.DAGStatus
		e.submitDAG(c.s, c.tok, idle(c.name)).Want(t, http.StatusCreated).JSON(t, &st)
		if c.tok == dagTokAcme {
			want = append(want, st.ID)
		}
	}
	list := func(tok, q string) apiv1.DAGList {
		t.Helper()
		var l apiv1.DAGList
		e.call(http.MethodGet, ap.http.URL+"/v1/dags?"+q, tok, nil).Want(t, http.StatusOK).JSON(t, &l)
		return l
	}
	var seen []apiv1.DAGSummary
	for q := "limit=2"; ; {
		l := list(dagTokAcme, q)
		if len(l.Runs) > 2 || len(l.Unavailable) > 0 {
			t.Fatalf("page %q: %+v", q, l)
		}
		seen = append(seen, l.Runs...)
		if l.NextCursor == "" {
			break
		}
		q = "limit=2&cursor=" + url.QueryEscape(l.NextCursor)
	}
	var ids []string
	for i, s := range seen {
		if s.Tenant != "acme" || slices.Contains(ids, s.ID) {
			t.Fatalf("run %d: %+v (another tenant's, or a repeat)", i, s)
		}
		if i > 0 && idTime(t, seen[i-1].ID).Before(idTime(t, s.ID)) {
			t.Fatalf("not newest first at %d: %s before %s", i, seen[i-1].ID, s.ID)
		}
		ids = append(ids, s.ID)
	}
	slices.Reverse(want)
	if len(ids) < len(want) || !slices.Equal(ids[:len(want)], want) {
		t.Fatalf("acme's runs %v, want the newest to be %v", ids, want)
	}
	l := list(dagTokAcme, "name=list-b&state=running")
	if len(l.Runs) != 1 || l.Runs[0].Region != "eu-west-1" || l.Runs[0].State != task.DAGRunning || l.Runs[0].Nodes[task.NodeReleased] != 1 {
		t.Fatalf("name=list-b: %+v", l)
	}
	l = list(dagTokGlobex, "name=list-a")
	if len(l.Runs) != 0 {
		t.Fatalf("globex sees acme's runs: %+v", l)
	}
	if rep := e.call(http.MethodGet, ap.http.URL+"/v1/dags?tenant=globex&name=list-g", dagTokAcme, nil).Want(t, http.StatusForbidden); rep.Err(t).Field != "tenant" {
		t.Fatalf("acme naming globex's runs: %s, want 403 naming tenant", rep.Body)
	}
	if l = list(dagTokAcme, "tenant=acme&name=list-b"); len(l.Runs) != 1 {
		t.Fatalf("acme naming itself: %+v", l)
	}
	for q, field := range map[string]string{"state=bogus": "state", "cursor=zz": "cursor", "limit=0": "limit", "typ=x": "typ", "region=mars": "region"} {
		rep := e.call(http.MethodGet, ap.http.URL+"/v1/dags?"+q, dagTokAcme, nil).Want(t, http.StatusBadRequest)
		if rep.Err(t).Field != field {
			t.Fatalf("%s: %s", q, rep.Body)
		}
	}
}

func idTime(t *testing.T, id string) time.Time {
	p, err := task.ParseID(id)
	if err != nil {
		t.Fatal(err)
	}
	return p.Time
}
