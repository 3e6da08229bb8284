package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// A handler's retry after is bounded by the task's pause budget
// (docs/limits.md), through real processes: two regions of two servers,
// auth on, retry.max_pause 5s in each region's file, the built-in http
// handler calling hooks that answer 429 Retry-After: 2.
//   - A task handed off from us-east-1 to eu-west-1 (max_retries 1) whose
//     hook always answers 429 pauses twice (4 s), then its third answer,
//     past the region's 5 s, fails the attempt; its retry's first answer
//     ends it FAILED with MAX_PAUSE_EXCEEDED: four calls in all, a dead
//     letter of eu-west-1, the reason shown through its home region's API
//     and by `ax get`.
//   - A task handed off the same way with max_pause 10s whose hook answers
//     429 three times (6 s: past the region's budget, within its own)
//     succeeds at its first attempt, 6 s paused.
func TestRetryAfterPauseBudgetAcrossRegions(t *testing.T) {
	testenv.Slow(t)
	hooks := &hookLog{calls: map[string][]time.Time{}, running: map[string]int{}, most: map[string]int{},
		pauses: map[string]int{"/hooks/always": 1 << 20, "/hooks/some": 3}, hang: make(chan struct{})}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	fed := newFederation(t, fedOpts{servers: 2, maxPause: 5 * time.Second,
		worker: fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", srv.URL+"/hooks/")})
	hook := func(path string) map[string]any {
		// A key each: one task's pause does not hold the other's calls.
		return map[string]any{"type": "http", "limit_key": path,
			"payload": map[string]any{"url": srv.URL + "/hooks/" + path, "body": map[string]int{"n": 1}}}
	}
	always := hook("always")
	always["max_retries"] = 1
	some := hook("some")
	some["max_pause"] = "10s"
	endless := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, always)
	within := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, some)

	dead := fed.waitState("us-east-1", tokSubmitterA, endless.ID, task.Failed, 60*time.Second)
	if dead.Reason != task.ReasonMaxPauseExceeded || dead.Attempts != 2 || time.Duration(dead.Paused) != 4*time.Second ||
		!strings.Contains(dead.LastError, "max_pause") {
		t.Errorf("the endless task: %s (%s), attempt %d, paused %s, error %q; want FAILED (MAX_PAUSE_EXCEEDED) at attempt 2, paused 4s, an error naming max_pause",
			dead.State, dead.Reason, dead.Attempts, time.Duration(dead.Paused), dead.LastError)
	}
	if calls, _ := hooks.of("/hooks/always"); len(calls) != 4 {
		t.Errorf("the endless task's hook saw %d calls, want 4 (two pauses, the answer past the budget, the retry's)", len(calls))
	}
	var steps []string
	for _, s := range fed.trail("us-east-1", tokSubmitterA, endless.ID) {
		if s.Reason == task.ReasonRetryAfter || s.Reason == task.ReasonMaxPauseExceeded {
			steps = append(steps, fmt.Sprintf("%s→%s %s", s.From, s.To, s.Reason))
		}
	}
	want := []string{"RUNNING→READY RETRY_AFTER", "RUNNING→READY RETRY_AFTER", "RUNNING→PENDING MAX_PAUSE_EXCEEDED",
		"RUNNING→FAILED MAX_PAUSE_EXCEEDED"}
	if !slices.Equal(steps, want) {
		t.Errorf("the endless task's pause steps %q, want %q", steps, want)
	}
	letters, err := fed.region("eu-west-1").store.Tasks().DeadLetters(context.Background(), 0, 10)
	if err != nil || !slices.ContainsFunc(letters, func(d *task.Task) bool { return d.ID == endless.ID }) {
		t.Errorf("eu-west-1's dead letters %v %v, want %s", letters, err, endless.ID)
	}
	out, stderr, code := runAx(t, fed.server("us-east-1").api, "--token", fed.token(tokSubmitterA), "get", endless.ID)
	if code != 0 || !strings.Contains(out, "FAILED (MAX_PAUSE_EXCEEDED)") || !strings.Contains(out, "4s by retry after, of the region's max_pause") {
		t.Errorf("ax get %s: exit %d, %s%s; want FAILED (MAX_PAUSE_EXCEEDED) and its paused time", endless.ID, code, out, stderr)
	}

	ok := fed.waitState("us-east-1", tokSubmitterA, within.ID, task.Success, 60*time.Second)
	if ok.Attempts != 1 || time.Duration(ok.Paused) != 6*time.Second {
		t.Errorf("the task within its budget: attempt %d, paused %s; want SUCCESS at attempt 1, paused 6s",
			ok.Attempts, time.Duration(ok.Paused))
	}
	if calls, _ := hooks.of("/hooks/some"); len(calls) != 4 {
		t.Errorf("the task within its budget: its hook saw %d calls, want 4 (three 429s, then the success)", len(calls))
	}
}
