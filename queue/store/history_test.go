package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// receiver is a second region's store on the same Redis (keys are scoped by
// region), sharing the env's clock.
func (e *env) receiver(region string) *stageSet {
	e.t.Helper()
	s, err := newStages(e.rdb, queue.Options{Region: region, Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// A hand-off that carries the task's history goes on counting: the receiver
// keeps its attempts (so its retry budget), creation time, last error and
// trail, adds a RECEIVED step, and a later failure spends what was left.
func TestHandOffCarriesHistory(t *testing.T) {
	e := newEnv(t)
	id := e.submit("", retries(2))
	home, err := e.s.Get(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	homeTrail, err := e.s.Trail(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if homeTrail[0].Region != "eu-west" {
		t.Fatalf("home trail without its region: %+v", homeTrail)
	}
	// Two attempts were spent elsewhere before (a TIMEOUT among them).
	carried := append(homeTrail,
		task.Transition{At: home.CreatedAt.Add(time.Second), From: task.Pending, To: task.HandedOff, Reason: task.ReasonHandedOff, Region: "eu-west"},
		task.Transition{At: home.CreatedAt.Add(2 * time.Second), From: task.Running, To: task.Timeout, Reason: task.ReasonHeartbeatLost, Attempt: 2, Region: "ap-south"})
	e.clock.Advance(5 * time.Second)
	rs := e.receiver("us-east")
	res, err := rs.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(retries(2)), Pool: "cpu", Returning: true,
		History: &queue.History{CreatedAt: home.CreatedAt, Attempts: 2, LastError: "lease expired", Trail: carried}})
	if err != nil || res[0].Err != nil || res[0].State != task.Ready {
		t.Fatalf("receive: %+v %v", res, err)
	}
	got, err := rs.Get(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 || !got.CreatedAt.Equal(home.CreatedAt) || got.LastError != "lease expired" {
		t.Fatalf("received record: attempts %d created %v error %q; want 2, %v, the carried error",
			got.Attempts, got.CreatedAt, got.LastError, home.CreatedAt)
	}
	tr, err := rs.Trail(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		reason, region string
		to             task.State
	}{
		{task.ReasonSubmitted, "eu-west", task.Pending},
		{task.ReasonHandedOff, "eu-west", task.HandedOff},
		{task.ReasonHeartbeatLost, "ap-south", task.Timeout},
		{task.ReasonReceived, "us-east", task.Ready},
	}
	if len(tr) != len(want) {
		t.Fatalf("trail %+v, want %d steps", tr, len(want))
	}
	for i, w := range want {
		if tr[i].Reason != w.reason || tr[i].Region != w.region || tr[i].To != w.to {
			t.Errorf("step %d: %+v, want %s in %s to %s", i, tr[i], w.reason, w.region, w.to)
		}
	}
	// One attempt is left of max_retries 2 (three runs in all): this claim
	// is attempt 3, and its failure exhausts the retries.
	cl, err := rs.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w9", N: 1})
	if err != nil || len(cl) != 1 || cl[0].Attempts != 3 {
		t.Fatalf("claim: %+v %v; want attempt 3", cl, err)
	}
	st, _, err := rs.Fail(e.ctx, queue.Failure{ID: id, Token: cl[0].LeaseToken, Error: "boom", Retryable: true})
	if err != nil || st != task.Failed {
		t.Fatalf("fail: %s %v; want FAILED (retries spent across regions)", st, err)
	}
	tr, _ = rs.Trail(e.ctx, id)
	var received, claimed int
	for _, s := range tr {
		if !task.Legal(s.From, s.To, s.Reason) {
			t.Errorf("illegal step %+v", s)
		}
		switch s.Reason {
		case task.ReasonReceived:
			received++
		case task.ReasonClaimed:
			claimed++
			if s.Region != "us-east" || s.Attempt != 3 {
				t.Errorf("claim step %+v", s)
			}
		case task.ReasonDue, task.ReasonPlaced:
			t.Errorf("the received READY step was written twice: %+v", s)
		}
	}
	if received != 1 || claimed != 1 || tr[len(tr)-1].Reason != task.ReasonRetriesExhausted {
		t.Fatalf("trail after failure: %+v", tr)
	}
}

// A task handed back to a region it left replaces its forwarding record and
// its old trail with the carried one (which holds this region's steps too).
func TestHandOffBackReplacesTrail(t *testing.T) {
	e := newEnv(t)
	id := e.outboxIDs(1)[0]
	if err := e.s.HandOffDone(e.ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st := e.state(id); st != task.HandedOff {
		t.Fatalf("home state %s", st)
	}
	homeTrail, _ := e.s.Trail(e.ctx, id)
	away := append(homeTrail, task.Transition{At: e.clock.Now(), From: task.HandedOff, To: task.Ready, Reason: task.ReasonReceived, Region: "us-east"},
		task.Transition{At: e.clock.Now(), From: task.Ready, To: task.Pending, Reason: task.ReasonDrained, Region: "us-east"},
		task.Transition{At: e.clock.Now(), From: task.Pending, To: task.HandedOff, Reason: task.ReasonHandedOff, Region: "us-east"})
	e.clock.Advance(time.Second)
	created, _ := e.s.Get(e.ctx, id)
	res, err := e.s.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(), Pool: "cpu", Returning: true,
		History: &queue.History{CreatedAt: created.CreatedAt, Trail: away}})
	if err != nil || res[0].Err != nil || res[0].State != task.Ready {
		t.Fatalf("hand back: %+v %v", res, err)
	}
	tr, _ := e.s.Trail(e.ctx, id)
	if len(tr) != len(away)+1 {
		t.Fatalf("trail %+v, want the %d carried steps and RECEIVED", tr, len(away))
	}
	last := tr[len(tr)-1]
	if last.Reason != task.ReasonReceived || last.Region != "eu-west" || last.From != task.HandedOff {
		t.Fatalf("last step %+v", last)
	}
	for _, s := range tr {
		if s.Reason == task.ReasonSubmitted && s.Region != "eu-west" {
			t.Fatalf("a second birth: %+v", s)
		}
	}
}

// Replay and priority of a handed-off task name the region holding it, as a
// cancel does, so the federation asks that region instead of answering 409.
func TestActionsOnAHandedOffTaskNameItsRegion(t *testing.T) {
	e := newEnv(t)
	id := e.outboxIDs(1)[0]
	if err := e.s.HandOffDone(e.ctx, id, true); err != nil {
		t.Fatal(err)
	}
	var ho *queue.HandedOffError
	if err := e.s.Replay(e.ctx, id, "op"); !errors.As(err, &ho) || ho.Region != "us-east" {
		t.Fatalf("replay: %v, want a HandedOffError naming us-east", err)
	}
	if err := e.s.SetPriority(e.ctx, id, 1, "op"); !errors.As(err, &ho) || ho.Region != "us-east" {
		t.Fatalf("priority: %v, want a HandedOffError naming us-east", err)
	}
	if _, err := e.s.Cancel(e.ctx, id, "", "op"); !errors.As(err, &ho) || ho.Region != "us-east" {
		t.Fatalf("cancel: %v, want a HandedOffError naming us-east", err)
	}
}

// A received task that succeeds shows its READY step once (RECEIVED).
func TestReceivedTaskSucceedsWithOneReadyStep(t *testing.T) {
	e := newEnv(t)
	rs := e.receiver("us-east")
	id := e.s.NewID(0, e.clock.Now())
	now := e.clock.Now()
	res, err := rs.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(), Pool: "cpu", Returning: true,
		History: &queue.History{CreatedAt: now, Trail: []task.Transition{{At: now, To: task.Pending, Reason: task.ReasonSubmitted, By: "api", Region: "eu-west"}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("receive: %+v %v", res, err)
	}
	cl, err := rs.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 1})
	if err != nil || len(cl) != 1 {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if errs, err := rs.Complete(e.ctx, queue.Completion{ID: id, Token: cl[0].LeaseToken}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	tr, _ := rs.Trail(e.ctx, id)
	var reasons []string
	for _, s := range tr {
		reasons = append(reasons, s.Reason)
	}
	if got := strings.Join(reasons, " "); got != "SUBMITTED RECEIVED CLAIMED COMPLETED" {
		t.Fatalf("trail reasons %q", got)
	}
}
