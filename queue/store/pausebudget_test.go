package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func maxPause(d time.Duration) func(*task.Spec) {
	return func(s *task.Spec) { s.MaxPause = task.Duration(d) }
}

// retryAfter answers a retry after of d for t and returns the new state.
func (e *env) retryAfter(t *task.Task, d time.Duration) task.State {
	e.t.Helper()
	st, err := e.s.RetryAfter(e.ctx, t.ID, t.LeaseToken, d)
	if err != nil {
		e.t.Fatalf("retry after %s: %v", t.ID, err)
	}
	return st
}

// A task's handler may pause it by retry-after answers up to its pause
// budget (its max_pause, else the region's): the answer that would take
// its paused time past the budget pauses nothing and fails the attempt
// (MAX_PAUSE_EXCEEDED, an attempt spent), retried by the task's policy and
// FAILED with that reason once none is left. A task within its budget
// pauses and runs as before.
func TestRetryAfterPauseBudget(t *testing.T) {
	const pause = time.Second
	cases := []struct {
		name   string
		region time.Duration // the region's retry.max_pause
		spec   []func(*task.Spec)
		fits   int // retry-after answers of a second that fit the budget
	}{
		{"task's budget", time.Hour, []func(*task.Spec){maxPause(3500 * time.Millisecond), retries(1)}, 3},
		{"region's budget", 2 * time.Second, []func(*task.Spec){retries(1)}, 2},
		{"task's budget over the region's", time.Second, []func(*task.Spec){maxPause(2 * time.Second), retries(1)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, oneShard, func(o *queue.Options) {
				o.Defaults = task.DefaultDefaults()
				o.Defaults.MaxPause = c.region
			})
			id := e.submit("p", append(c.spec, limitKeyOf("acme"))...)
			for i := 0; i < c.fits; i++ {
				if st := e.retryAfter(e.claimOne("p"), pause); st != task.Ready {
					t.Fatalf("retry after %d: %s, want READY (within the budget)", i+1, st)
				}
				e.clock.Advance(pause + time.Millisecond)
			}
			tk := e.claimOne("p")
			if tk.ID != id || tk.Attempts != 1 || time.Duration(tk.Paused) != time.Duration(c.fits)*pause {
				t.Fatalf("claimed %s attempt %d paused %s, want %s attempt 1 paused %s", tk.ID, tk.Attempts,
					time.Duration(tk.Paused), id, time.Duration(c.fits)*pause)
			}
			if st := e.retryAfter(tk, pause); st != task.Pending {
				t.Fatalf("retry after past the budget: %s, want PENDING (a failed attempt, retried)", st)
			}
			got, err := e.s.Get(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != task.ReasonRetryBackoff || got.Attempts != 1 || !strings.Contains(got.LastError, "max_pause") {
				t.Errorf("after the failed attempt: %s attempt %d error %q, want RETRY_BACKOFF, attempt 1 and an error naming max_pause",
					got.Reason, got.Attempts, got.LastError)
			}
			// The refused answer paused nothing: the key's other tasks run.
			other := e.submit("p", limitKeyOf("acme"))
			if o := e.claimOne("p"); o.ID != other {
				t.Fatalf("claimed %s, want %s (the key is not paused)", o.ID, other)
			}
			e.clock.Advance(time.Minute)
			if _, err := e.s.Promote(e.ctx, leader, 10); err != nil {
				t.Fatal(err)
			}
			tk = e.claimOne("p")
			if tk.ID != id || tk.Attempts != 2 {
				t.Fatalf("claimed %s attempt %d, want %s's retry (attempt 2)", tk.ID, tk.Attempts, id)
			}
			if st := e.retryAfter(tk, pause); st != task.Failed {
				t.Fatalf("retry after on the last attempt: %s, want FAILED", st)
			}
			if got, err = e.s.Get(e.ctx, id); err != nil || got.Reason != task.ReasonMaxPauseExceeded {
				t.Fatalf("the dead task: %+v %v, want reason MAX_PAUSE_EXCEEDED", got, err)
			}
			dead, err := e.s.DeadLetters(e.ctx, 0, 10)
			if err != nil || len(dead) != 1 || dead[0].ID != id {
				t.Errorf("dead letters %v %v, want %s", dead, err, id)
			}
			r := e.reasons(id)
			if r[task.ReasonRetryAfter] != c.fits || r[task.ReasonMaxPauseExceeded] != 2 {
				t.Errorf("trail %v, want %d RETRY_AFTER and 2 MAX_PAUSE_EXCEEDED", r, c.fits)
			}
		})
	}
}

// A cancel requested while the attempt ran wins over the pause budget,
// as it wins over a pause.
func TestRetryAfterPastBudgetCanceled(t *testing.T) {
	e := newEnv(t, oneShard)
	id := e.submit("p", maxPause(time.Second))
	tk := e.claimOne("p")
	if _, err := e.s.Cancel(e.ctx, id, task.ReasonCanceledByUser, "test"); err != nil {
		t.Fatal(err)
	}
	if st := e.retryAfter(tk, 2*time.Second); st != task.Canceled {
		t.Fatalf("retry after of a canceled task past its budget: %s, want CANCELED", st)
	}
}
