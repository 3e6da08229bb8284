package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// ax dlq replay by filter: pages newest first, stops at the first dead
// letter older than --since, replays each once, says what it did; the
// filter goes to the server; a failure to replay one is exit 1 after the rest.
func TestCLIReplayDeadLettersByFilter(t *testing.T) {
	now := time.Now().UTC()
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339Nano) }
	f := newCLIFakeAPI(t).
		handle("GET /v1/dlq", func(w http.ResponseWriter, r *http.Request, _ []byte) {
			if r.URL.Query().Get("cursor") == "" {
				cliReply(w, 200, `{"tasks":[{"id":"a","finished_at":"`+at(time.Minute)+`"},{"id":"b","finished_at":"`+at(2*time.Minute)+`"}],"next_cursor":"p2","unavailable":[]}`)
				return
			}
			cliReply(w, 200, `{"tasks":[{"id":"c","finished_at":"`+at(3*time.Minute)+`"},{"id":"old","finished_at":"`+at(3*time.Hour)+`"}],"next_cursor":"p3","unavailable":[]}`)
		}).
		on("POST /v1/tasks/a/replay", 200, `{"id":"a","state":"PENDING"}`).
		on("POST /v1/tasks/c/replay", 200, `{"id":"c","state":"PENDING"}`)

	r := cliExec(t, nil, f, "", "dlq", "replay", "--type", "report", "--tenant", "acme", "--since", "1h", "--dry-run")
	if r.err != nil || strings.Join(strings.Fields(r.stdout), " ") != "a would be replayed b would be replayed c would be replayed" {
		t.Fatalf("dry run: %v\n%s", r.err, r.stdout)
	}
	for _, s := range f.requests() {
		if s.Method != http.MethodGet || !strings.Contains(s.Query, "type=report") || !strings.Contains(s.Query, "tenant=acme") {
			t.Fatalf("a dry run sent %+v", s)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("%d pages read, want 2 (the second holds one older than --since)", n)
	}

	r = cliExec(t, nil, f, "", "dlq", "replay", "--since", "1h")
	if r.code != 1 || !strings.Contains(r.err.Error(), "1 of 3 dead letters were not replayed") {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	if !strings.Contains(r.stdout, "a  PENDING  replayed") || !strings.Contains(r.stdout, "c  PENDING  replayed") || strings.Contains(r.stdout, "old") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "ax: b: ") || !strings.Contains(r.stderr, "replayed 2 of 3") {
		t.Errorf("stderr %q", r.stderr)
	}

	r = cliExec(t, nil, f, "", "dlq", "replay", "--all", "--max", "2", "-o", "json", "--dry-run")
	var ids []string
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &ids) != nil || strings.Join(ids, ",") != "a,b" || !strings.Contains(r.stderr, "more than 2") {
		t.Fatalf("--max 2: %v %q %q", r.err, r.stdout, r.stderr)
	}
}

// ax tail with no --region follows every region the server lists, each
// line with its region and a full timestamp; -o json carries the region.
func TestCLITailFollowsEveryRegion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	calls := map[string]int{}
	f := newCLIFakeAPI(t).
		on("GET /v1/regions", 200, `{"regions":[{"name":"us-east"},{"name":"eu-west"}],"global_view":true}`).
		handle("GET /v1/events", func(w http.ResponseWriter, r *http.Request, _ []byte) {
			region := r.URL.Query().Get("region")
			mu.Lock()
			calls[region]++
			n, both := calls[region], calls["us-east"] > 1 && calls["eu-west"] > 1
			stop := cancel // the run's own: the second run replaces it
			mu.Unlock()
			switch {
			case n == 1 && region == "us-east":
				cliReply(w, 200, `{"region":"us-east","events":[{"id":"1767323045000-0","op":"submit","n":1,"tasks":["t1"]}],"next":"u1"}`)
			case n == 1:
				cliReply(w, 200, `{"region":"eu-west","events":[{"id":"1767323046000-0","op":"claim","n":1,"tasks":["t1"]}],"next":"e1"}`)
			case both:
				stop() // Ctrl-C once both streams were read
				<-r.Context().Done()
			default:
				cliReply(w, 200, `{"region":"`+region+`","events":[],"next":""}`)
			}
		})
	r := cliExec(t, ctx, f, "", "tail", "--wait", "1s", "-o", "json")
	if r.err != nil {
		t.Fatalf("tail: %v", r.err)
	}
	var seen []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct{ Region, Op string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		seen = append(seen, e.Region+" "+e.Op)
	}
	if got := strings.Join(seen, ","); got != "us-east submit,eu-west claim" && got != "eu-west claim,us-east submit" {
		t.Fatalf("events %q, want one of each region", got)
	}

	mu.Lock()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls = map[string]int{}
	mu.Unlock()
	r = cliExec(t, ctx, f, "", "tail", "--wait", "1s")
	if !strings.Contains(r.stdout, "2026-01-02T03:04:05.000Z  us-east  submit") {
		t.Fatalf("want full timestamps and the region:\n%s", r.stdout)
	}
}

// Shell completion (cobra's __complete) offers fixed values and the API's:
// regions and pools from /v1/regions, task ids from /v1/tasks, dead letters
// from /v1/dlq, with the command's --api and --token.
func TestCLICompletesValues(t *testing.T) {
	f := newCLIFakeAPI(t).
		on("GET /v1/regions", 200, `{"regions":[{"name":"us-east","pools":[{"name":"cpu"},{"name":"gpu"}]},{"name":"eu-west","pools":[{"name":"cpu"}]}],"global_view":true}`).
		on("GET /v1/tasks", 200, `{"tasks":[{"id":"t1.0.us-east"},{"id":"t2.0.eu-west"}],"unavailable":[]}`).
		on("GET /v1/dlq", 200, `{"tasks":[{"id":"d1.0.us-east"}],"unavailable":[]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "ls", "--state", "R"}, "READY RUNNING"},
		{[]string{"cancel", "--state", ""}, "PENDING READY"},
		{[]string{"tasks", "ls", "-o", ""}, "table json"},
		{[]string{"tasks", "ls", "--region", ""}, "us-east eu-west"},
		{[]string{"tasks", "ls", "--pool", ""}, "cpu gpu"},
		{[]string{"get", "t"}, "t1.0.us-east t2.0.eu-west"},
		{[]string{"get", "t1.0.us-east", ""}, ""},
		{[]string{"cancel", "t1.0.us-east", "t2"}, "t2.0.eu-west"},
		{[]string{"dlq", "replay", ""}, "d1.0.us-east"},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"__complete", "--api", f.srv.URL, "--token", "tok", "--settings="}, c.args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("complete %q: %v", c.args, err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				got = append(got, l)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("complete %q: %q, want %q", c.args, got, c.want)
		}
	}
	for _, s := range f.requests() {
		if s.Auth != "Bearer tok" {
			t.Fatalf("completion sent %s %s with Authorization %q, want the command's token", s.Method, s.Path, s.Auth)
		}
	}
}
