package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func unique(key, until string, d time.Duration) func(*task.Spec) {
	return func(s *task.Spec) { s.UniqueKey, s.UniqueUntil, s.UniqueFor = key, until, task.Duration(d) }
}

func (e *env) submitOne(nt queue.NewTask) queue.SubmitResult {
	e.t.Helper()
	res, err := e.s.Submit(e.ctx, nt)
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("submit: %v %+v", err, res)
	}
	return res[0]
}

// TestUniqueKeyHoldsPerMode: a held key answers with its task and creates
// nothing; it is released as its mode says (started, finished, window),
// and a tenant's keys are its own.
func TestUniqueKeyHoldsPerMode(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		until                  string
		heldRunning, heldAfter bool
	}{
		{task.UniqueUntilStarted, false, false},
		{task.UniqueUntilFinished, true, false},
		{task.UniqueUntilWindow, true, true},
	} {
		t.Run(tc.until, func(t *testing.T) {
			key := unique("k-"+tc.until, tc.until, time.Hour)
			first := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
			if first.Duplicate {
				t.Fatalf("first submit: %+v", first)
			}
			if rec, err := e.s.Get(e.ctx, first.ID); err != nil || rec.UniqueKey != "k-"+tc.until {
				t.Fatalf("the record's unique key: %+v %v, want k-%s", rec, err, tc.until)
			}
			again := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
			if !again.Duplicate || again.ID != first.ID || again.State != task.Ready {
				t.Fatalf("while waiting: %+v, want a duplicate of %s", again, first.ID)
			}
			other := e.submitOne(queue.NewTask{Spec: e.spec(key, func(s *task.Spec) { s.Tenant = "acme" }), Pool: "cpu"})
			if other.Duplicate {
				t.Fatalf("another tenant's key collided: %+v", other)
			}
			ts := e.claim("cpu", 10)
			running := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
			if running.Duplicate != tc.heldRunning {
				t.Fatalf("while running: %+v, want held %v", running, tc.heldRunning)
			}
			e.complete(ts...)
			if !running.Duplicate {
				e.complete(e.claim("cpu", 10)...)
			}
			after := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
			if after.Duplicate != tc.heldAfter {
				t.Fatalf("after it finished: %+v, want held %v", after, tc.heldAfter)
			}
			e.complete(e.claim("cpu", 10)...)
		})
	}
}

// TestUniqueKeyExpiresWithUniqueFor: the key is free once unique_for has
// passed, even while its task still waits.
func TestUniqueKeyExpiresWithUniqueFor(t *testing.T) {
	e := newEnv(t)
	key := unique("short", task.UniqueUntilFinished, 50*time.Millisecond)
	first := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
	// The TTL is Redis's own clock, not the injected one.
	time.Sleep(120 * time.Millisecond)
	if again := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"}); again.Duplicate || again.ID == first.ID {
		t.Fatalf("after unique_for: %+v", again)
	}
}

// TestDebounceReplacesTheWaitingTask: each submit within the debounce
// replaces the waiting task (CANCELED, DEBOUNCED) and pushes the start
// back, never past max_wait from the run's first submit.
func TestDebounceReplacesTheWaitingTask(t *testing.T) {
	e := newEnv(t)
	deb := func(s *task.Spec) {
		s.DebounceKey, s.Debounce, s.DebounceMaxWait = "sync-user-7", task.Duration(10*time.Second), task.Duration(25*time.Second)
	}
	start := e.clock.Now()
	var ids []string
	for i := range 4 {
		sp := e.spec(deb, func(s *task.Spec) { s.Payload = []byte(fmt.Sprintf(`{"n":%d}`, i)) })
		r := e.submitOne(queue.NewTask{Spec: sp})
		ids = append(ids, r.ID)
		if r.Duplicate || r.State != task.Pending {
			t.Fatalf("submit %d: %+v", i, r)
		}
		e.clock.Advance(8 * time.Second)
	}
	for _, id := range ids[:3] {
		tk, err := e.s.Get(e.ctx, id)
		if err != nil || tk.State != task.Canceled || tk.Reason != task.ReasonDebounced {
			t.Fatalf("replaced %s: %+v %v", id, tk, err)
		}
	}
	last, err := e.s.Get(e.ctx, ids[3])
	if err != nil || last.State != task.Pending || string(last.Payload) != `{"n":3}` || last.DebounceKey != "sync-user-7" {
		t.Fatalf("last: %+v %v", last, err)
	}
	// Submitted at +24 s: +34 s by its debounce, capped at +25 s.
	if want := start.Add(25 * time.Second); last.DueAt == nil || !last.DueAt.Equal(want) {
		t.Fatalf("last starts at %v, want %v (max_wait)", last.DueAt, want)
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Pending != 1 {
		t.Fatalf("pending %d, want 1", c.Pending)
	}
	if got := e.backlog("default"); got != 1 {
		t.Fatalf("backlog %d, want 1", got)
	}
	trail, err := e.s.Trail(e.ctx, ids[0])
	if err != nil || len(trail) == 0 || trail[len(trail)-1].Reason != task.ReasonDebounced {
		t.Fatalf("trail of a replaced task: %+v %v", trail, err)
	}
	// Once due and started, a new submit begins a new run.
	e.clock.Advance(2 * time.Second)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	r := e.submitOne(queue.NewTask{Spec: e.spec(deb)})
	if st := e.state(ids[3]); st == task.Canceled {
		t.Fatalf("a due task was replaced: %s", st)
	}
	tk, _ := e.s.Get(e.ctx, r.ID)
	if want := e.clock.Now().Add(10 * time.Second); tk.DueAt == nil || !tk.DueAt.Equal(want) {
		t.Fatalf("new run starts at %v, want %v", tk.DueAt, want)
	}
}

// TestUniqueKeyOfAHandedOffHolder: a key whose holder left the region
// (its record forwards, HANDED_OFF) stays held, and is taken from that
// holder only by a submit naming it (NewTask.Supersedes, once its region
// said it is past unique_until).
func TestUniqueKeyOfAHandedOffHolder(t *testing.T) {
	e := newEnv(t)
	key := unique("moved", task.UniqueUntilFinished, time.Hour)
	first := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
	if err := e.rdb.HSet(e.ctx, e.shardPrefix(first.ID)+"t:"+first.ID, "st", "H").Err(); err != nil {
		t.Fatal(err)
	}
	held := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
	if !held.Duplicate || held.ID != first.ID || held.State != task.HandedOff {
		t.Fatalf("while handed off: %+v", held)
	}
	other := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu", Supersedes: "not-the-holder"})
	if !other.Duplicate || other.ID != first.ID {
		t.Fatalf("superseding another task: %+v", other)
	}
	next := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu", Supersedes: first.ID})
	if next.Duplicate || next.ID == first.ID {
		t.Fatalf("superseding the holder: %+v", next)
	}
	if again := e.submitOne(queue.NewTask{Spec: e.spec(key), Pool: "cpu"}); !again.Duplicate || again.ID != next.ID {
		t.Fatalf("after the takeover: %+v, want a duplicate of %s", again, next.ID)
	}
}

// TestParentResultsRideTheRecord: a DAG node's parents' results, bytes
// that are not UTF-8 among them, are stored with its task and handed to
// the worker that claims it unchanged; a task of no DAG carries none.
func TestParentResultsRideTheRecord(t *testing.T) {
	e := newEnv(t)
	parents := task.ParentResults{"extract": []byte(`{"rows":3}`), "bin": {0xff, 0x00, 0xfe}, "empty": {}}
	node := e.submitOne(queue.NewTask{Spec: e.spec(func(s *task.Spec) { s.Parents = parents }), Pool: "cpu"})
	plain := e.submitOne(queue.NewTask{Spec: e.spec(), Pool: "cpu"})
	got := map[string]task.ParentResults{}
	for _, tk := range e.claim("cpu", 10) {
		got[tk.ID] = tk.Parents
	}
	if diff := cmp.Diff(map[string]task.ParentResults{node.ID: parents, plain.ID: nil}, got); diff != "" {
		t.Fatalf("claimed parents (-want +got):\n%s", diff)
	}
	rec, err := e.s.Get(e.ctx, node.ID)
	if err != nil || cmp.Diff(parents, rec.Parents) != "" || cmp.Diff(parents, rec.Spec().Parents) != "" {
		t.Fatalf("read back: %+v %v", rec, err)
	}
}
