package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// receiveHeld stores n hand-offs from region from in rs, held for its word.
func (e *env) receiveHeld(rs *stageSet, from string, n int, mod ...func(*task.Spec)) []string {
	e.t.Helper()
	var ids []string
	for range n {
		id := e.submit("", mod...) // an id of the home store, as a hand-off keeps
		home, err := e.s.Get(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		res, err := rs.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(mod...), Pool: "cpu", Returning: true, HeldFrom: from,
			History: &queue.History{CreatedAt: home.CreatedAt}})
		if err != nil || res[0].Err != nil || res[0].State != task.Pending {
			e.t.Fatalf("receive held: %+v %v", res, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// A held hand-off is not claimable until its sender's word; released, it is
// READY with a COMMITTED step (a legal trail); a word from another region
// changes nothing; dropped, it is gone with its trail; canceled, it leaves
// the held set.
func TestHeldHandOffsWaitForTheSendersWord(t *testing.T) {
	e := newEnv(t)
	rs := e.receiver("us-east")
	ids := e.receiveHeld(rs, "eu-west", 3)
	if ts, err := rs.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 10}); err != nil || len(ts) != 0 {
		t.Fatalf("claimed %d held hand-offs (%v); want none before the sender's word", len(ts), err)
	}
	held, err := rs.Held(e.ctx, e.clock.Now().Add(time.Second), 100)
	if err != nil || len(held) != 3 || held[0].From != "eu-west" {
		t.Fatalf("held: %+v %v", held, err)
	}
	if c, _ := rs.Counts(e.ctx); c.Held != 3 || c.Pending != 3 {
		t.Fatalf("counts: held %d pending %d, want 3 and 3", c.Held, c.Pending)
	}
	if k, err := rs.Release(e.ctx, "ap-south", ids); err != nil || k != 0 {
		t.Fatalf("a word from another region released %d (%v)", k, err)
	}
	e.clock.Advance(time.Second)
	if k, err := rs.Release(e.ctx, "eu-west", ids[:1]); err != nil || k != 1 {
		t.Fatalf("release: %d %v", k, err)
	}
	if k, _ := rs.Release(e.ctx, "eu-west", ids[:1]); k != 0 {
		t.Fatalf("a second release released %d", k)
	}
	ts, err := rs.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 10})
	if err != nil || len(ts) != 1 || ts[0].ID != ids[0] {
		t.Fatalf("claim after release: %+v %v", ts, err)
	}
	tr, err := rs.Trail(e.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	committed := 0
	for _, x := range tr {
		if !task.Legal(x.From, x.To, x.Reason) {
			t.Errorf("illegal step %+v", x)
		}
		if x.Reason == task.ReasonCommitted {
			committed++
		}
	}
	if committed != 1 {
		t.Fatalf("trail has %d COMMITTED steps, want 1: %+v", committed, tr)
	}
	defer func() {
		// An attempt that fails flushes the attempt's steps to the log:
		// the COMMITTED step stays one (it was logged twice).
		if _, _, err := rs.Fail(e.ctx, queue.Failure{ID: ids[0], Token: ts[0].LeaseToken, Error: "boom", Retryable: true}); err != nil {
			t.Fatal(err)
		}
		tr, err := rs.Trail(e.ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range tr {
			if x.Reason == task.ReasonCommitted {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("after a failed attempt the trail has %d COMMITTED steps, want 1: %+v", n, tr)
		}
	}()
	if k, err := rs.Drop(e.ctx, "eu-west", ids[1:2]); err != nil || k != 1 {
		t.Fatalf("drop: %d %v", k, err)
	}
	if _, err := rs.Get(e.ctx, ids[1]); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("a dropped hand-off reads %v, want not found", err)
	}
	if _, err := rs.Cancel(e.ctx, ids[2], task.ReasonCanceledByUser, "op"); err != nil {
		t.Fatal(err)
	}
	if k, _ := rs.Release(e.ctx, "eu-west", ids[2:]); k != 0 {
		t.Fatal("a canceled hand-off was released")
	}
	if held, _ := rs.Held(e.ctx, e.clock.Now().Add(time.Hour), 100); len(held) != 0 {
		t.Fatalf("still held: %+v", held)
	}
	c, err := rs.Counts(e.ctx)
	if err != nil || c.Pending != 0 || c.Held != 0 || c.Running != 1 {
		t.Fatalf("counts: %+v %v; want 0 pending, 0 held, 1 running", c, err)
	}
}

// A delayed hand-off released goes to the delayed set: READY only when due.
func TestHeldDelayedHandOffWaitsForItsTime(t *testing.T) {
	e := newEnv(t)
	rs := e.receiver("us-east")
	ids := e.receiveHeld(rs, "eu-west", 1, delay(time.Minute))
	if k, err := rs.Release(e.ctx, "eu-west", ids); err != nil || k != 1 {
		t.Fatalf("release: %d %v", k, err)
	}
	if st, err := rs.Get(e.ctx, ids[0]); err != nil || st.State != task.Pending {
		t.Fatalf("a delayed release reads %+v %v, want PENDING", st, err)
	}
	if ts, _ := rs.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 10}); len(ts) != 0 {
		t.Fatal("a delayed release was claimable before its time")
	}
}

// The sender's word is its record: HANDED_OFF to the asker is committed,
// in the outbox for it pending, anything else revoked; no record unknown
// while the task is younger than every retention, else revoked.
func TestHandOffWord(t *testing.T) {
	e := newEnv(t)
	ids := e.outboxIDs(3) // bound for us-east
	if _, err := e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: ids[0], Accepted: true}, {ID: ids[1], Revoked: true}}); err != nil {
		t.Fatal(err)
	}
	other := e.submit("cpu")
	lost := e.submit("cpu") // its record lost (a Redis without AOF, say)
	if err := e.rdb.Del(e.ctx, e.shardPrefix(lost)+"t:"+lost).Err(); err != nil {
		t.Fatal(err)
	}
	expired := "0000000000000000.0.eu-west" // older than every retention
	words, err := e.s.HandOffWord(e.ctx, "us-east", []string{ids[0], ids[1], ids[2], other, lost, expired})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{queue.WordCommitted, queue.WordRevoked, queue.WordPending, queue.WordRevoked, queue.WordUnknown, queue.WordRevoked}
	for i := range want {
		if words[i] != want[i] {
			t.Fatalf("words %v, want %v", words, want)
		}
	}
	tr, _ := e.s.Trail(e.ctx, ids[1])
	found := false
	for _, x := range tr {
		found = found || x.Reason == task.ReasonHandOffRevoked
	}
	if !found {
		t.Fatalf("a revoked hand-off's trail lacks HANDOFF_REVOKED: %+v", tr)
	}
}

// A task handed back home and held there, whose hand-off back is revoked,
// keeps a forwarding record at home to the region that has it: its id
// still leads to it.
func TestHeldHandOffBackHomeDroppedKeepsTheForwarding(t *testing.T) {
	e := newEnv(t)
	ids := e.outboxIDs(1) // home eu-west, bound for us-east
	if _, err := e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: ids[0], Accepted: true}}); err != nil {
		t.Fatal(err)
	}
	home, err := e.s.Get(e.ctx, ids[0])
	if err != nil || home.State != task.HandedOff {
		t.Fatalf("home record: %+v %v", home, err)
	}
	res, err := e.s.Submit(e.ctx, queue.NewTask{ID: ids[0], Spec: e.spec(), Pool: "cpu", Returning: true, HeldFrom: "us-east",
		History: &queue.History{CreatedAt: home.CreatedAt}})
	if err != nil || res[0].Err != nil || res[0].State != task.Pending {
		t.Fatalf("handed back: %+v %v", res, err)
	}
	if k, err := e.s.Drop(e.ctx, "us-east", ids); err != nil || k != 1 {
		t.Fatalf("drop: %d %v", k, err)
	}
	got, err := e.s.Get(e.ctx, ids[0])
	if err != nil || got.State != task.HandedOff || got.HandedOffTo != "us-east" {
		t.Fatalf("after the revoked hand-back home reads %+v %v; want HANDED_OFF to us-east", got, err)
	}
	tr, _ := e.s.Trail(e.ctx, ids[0])
	for _, x := range tr {
		if !task.Legal(x.From, x.To, x.Reason) {
			t.Errorf("illegal step %+v", x)
		}
	}
	if c, _ := e.s.Counts(e.ctx); c.Pending != 0 {
		t.Fatalf("%d pending after the drop", c.Pending)
	}
}
