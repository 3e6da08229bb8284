package store_test

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// outboxIDs submits n tasks bound for region "us-east" (pool "cpu") and
// returns their ids; with several shards they spread over all of them.
func (e *env) outboxIDs(n int) []string {
	e.t.Helper()
	var ids []string
	for start := 0; start < n; start += queue.MaxBatch {
		var ts []queue.NewTask
		for i := start; i < min(start+queue.MaxBatch, n); i++ {
			ts = append(ts, queue.NewTask{Spec: e.spec(), Pool: "cpu", HandOff: "us-east"})
		}
		res, err := e.s.Submit(e.ctx, ts...)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.State != task.Pending {
				e.t.Fatalf("submit: %+v", r)
			}
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// outboxDue lists the ids of the outbox due now, sorted.
func (e *env) outboxDue() []string {
	e.t.Helper()
	ts, err := e.s.Outbox(e.ctx, queue.MaxBatch)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	sort.Strings(ids)
	return ids
}

func sortedIDs(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

func TestHandOffDoneMany(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	ids := e.outboxIDs(6)
	shards := map[int]bool{}
	for _, id := range ids {
		p, _ := task.ParseID(id)
		shards[p.Shard] = true
	}
	if len(shards) != 2 {
		t.Fatalf("the tasks sit in shards %v; the test needs both", shards)
	}
	ready := e.submit("cpu") // READY here: never in the outbox
	answers := []queue.HandOffAnswer{
		{ID: ids[0], Accepted: true}, {ID: ids[1], Accepted: true}, {ID: ids[2], Accepted: true},
		{ID: ids[3], Accepted: false},
		{ID: ready, Accepted: true},
		{ID: "not-an-id", Accepted: true},
		{ID: ids[4], Accepted: false},
	}
	errs, err := e.s.HandOffDoneMany(e.ctx, answers)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		var te *task.TransitionError
		switch a.ID {
		case ready:
			if !errors.As(errs[i], &te) || te.State != task.Ready || te.ID != ready {
				t.Fatalf("a READY task: %v, want a TransitionError in READY", errs[i])
			}
		case "not-an-id":
			if !errors.Is(errs[i], task.ErrBadID) {
				t.Fatalf("a malformed id: %v, want ErrBadID", errs[i])
			}
		default:
			if errs[i] != nil {
				t.Fatalf("answer %d (%+v): %v", i, a, errs[i])
			}
		}
	}
	for _, id := range ids[:3] {
		tk, err := e.s.Get(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != task.HandedOff || tk.HandedOffTo != "us-east" || tk.HandOffTarget != "" || tk.Reason != task.ReasonHandedOff {
			t.Fatalf("accepted %s: %+v", id, tk)
		}
		tr, err := e.s.Trail(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if last := tr[len(tr)-1]; last.To != task.HandedOff || last.Reason != task.ReasonHandedOff || last.By != "us-east/cpu" {
			t.Fatalf("trail of %s ends with %+v", id, last)
		}
	}
	for _, id := range []string{ids[3], ids[4]} {
		tk, err := e.s.Get(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != task.Pending || tk.HandOffTarget != "" || tk.Pool != "" {
			t.Fatalf("refused %s: %+v, want PENDING, unplaced, out of the outbox", id, tk)
		}
	}
	// The refused wait for placement again, in the due set.
	dueTasks, err := e.s.DueTasks(e.ctx, queue.MaxBatch)
	if err != nil {
		t.Fatal(err)
	}
	var dueIDs []string
	for _, tk := range dueTasks {
		dueIDs = append(dueIDs, tk.ID)
	}
	if d := cmp.Diff(sortedIDs([]string{ids[3], ids[4]}), sortedIDs(dueIDs)); d != "" {
		t.Fatalf("due set (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{ids[5]}, e.outboxDue()); d != "" {
		t.Fatalf("outbox (-want +got):\n%s", d)
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pending != 3 || c.Ready != 1 {
		t.Fatalf("counts: %d pending, %d ready; want 3 (2 refused + 1 in the outbox), 1", c.Pending, c.Ready)
	}

	// A repeat of an answer changes nothing: the task left the outbox.
	errs, err = e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: ids[0], Accepted: false}, {ID: ids[3], Accepted: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []task.State{task.HandedOff, task.Pending} {
		var te *task.TransitionError
		if !errors.As(errs[i], &te) || te.State != want {
			t.Fatalf("repeat %d: %v, want a TransitionError in %s", i, errs[i], want)
		}
	}
	if tk, _ := e.s.Get(e.ctx, ids[0]); tk.State != task.HandedOff {
		t.Fatalf("a repeated answer changed %s: %+v", ids[0], tk)
	}

	// HandOffDone is the one-answer form.
	if err := e.s.HandOffDone(e.ctx, ids[5], true); err != nil {
		t.Fatal(err)
	}
	var te *task.TransitionError
	if err := e.s.HandOffDone(e.ctx, ids[5], true); !errors.As(err, &te) || te.State != task.HandedOff {
		t.Fatalf("second HandOffDone: %v", err)
	}
}

// More answers than one script takes (MaxBatch) are split, per shard.
func TestHandOffDoneManyLargeBatch(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	ids := e.outboxIDs(2500)
	answers := make([]queue.HandOffAnswer, len(ids))
	for i, id := range ids {
		answers[i] = queue.HandOffAnswer{ID: id, Accepted: i%10 != 0}
	}
	errs, err := e.s.HandOffDoneMany(e.ctx, answers)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if d := e.outboxDue(); len(d) != 0 {
		t.Fatalf("%d tasks still in the outbox", len(d))
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pending != 250 {
		t.Fatalf("%d pending, want the 250 refused", c.Pending)
	}
	for _, i := range []int{0, 1, 999, 1000, 2499} {
		want := task.HandedOff
		if i%10 == 0 {
			want = task.Pending
		}
		if st := e.state(ids[i]); st != want {
			t.Fatalf("task %d: %s, want %s", i, st, want)
		}
	}
}

func TestHandOffRetryMany(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	ids := e.outboxIDs(4)
	gone := ids[3]
	if err := e.s.HandOffDone(e.ctx, gone, true); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	err := e.s.HandOffRetryMany(e.ctx, []queue.OutboxRetry{
		{ID: ids[0], At: now.Add(time.Second)},
		{ID: ids[1], At: now.Add(3 * time.Second)},
		{ID: gone, At: now.Add(time.Second)}, // not in the outbox: left alone
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{ids[2]}, e.outboxDue()); d != "" {
		t.Fatalf("due now (-want +got):\n%s", d)
	}
	e.clock.Advance(time.Second)
	if d := cmp.Diff(sortedIDs([]string{ids[0], ids[2]}), e.outboxDue()); d != "" {
		t.Fatalf("due after 1s (-want +got):\n%s", d)
	}
	e.clock.Advance(2 * time.Second)
	if d := cmp.Diff(sortedIDs(ids[:3]), e.outboxDue()); d != "" {
		t.Fatalf("due after 3s (-want +got):\n%s", d)
	}
	if st := e.state(gone); st != task.HandedOff {
		t.Fatalf("a retry of a task not in the outbox changed it: %s", st)
	}
	if err := e.s.HandOffRetryMany(e.ctx, nil); err != nil {
		t.Fatalf("no retries: %v", err)
	}
	if err := e.s.HandOffRetryMany(e.ctx, []queue.OutboxRetry{{ID: "nope", At: now}}); !errors.Is(err, task.ErrBadID) {
		t.Fatalf("a malformed id: %v, want ErrBadID", err)
	}
}

// A cancel while the hand-off is in flight is a request: an "accepted"
// answer that did not carry it out sends the task again (ErrSendCancel);
// "accepted-canceled" ends the hand-off; a refusal cancels it here.
func TestCancelDuringHandOff(t *testing.T) {
	e := newEnv(t)
	res, err := e.s.Submit(e.ctx,
		queue.NewTask{Spec: e.spec(), Pool: "cpu", HandOff: "us-east"},
		queue.NewTask{Spec: e.spec(), Pool: "cpu", HandOff: "us-east"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].ID, res[1].ID
	for _, id := range []string{a, b} {
		st, err := e.s.Cancel(e.ctx, id, "", "op")
		if err != nil || st != task.Pending {
			t.Fatalf("cancel in flight: %s %v, want a request (PENDING)", st, err)
		}
	}
	ts, _ := e.s.Outbox(e.ctx, 10)
	if len(ts) != 2 || !ts[0].CancelRequested || !ts[1].CancelRequested {
		t.Fatalf("outbox %+v: want both with the cancel request", ts)
	}
	errs, err := e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: a, Accepted: true}, {ID: b, Accepted: false}})
	if err != nil || !errors.Is(errs[0], queue.ErrSendCancel) || errs[1] != nil {
		t.Fatalf("answers: %v %v", errs, err)
	}
	if tk, _ := e.s.Get(e.ctx, a); tk.State != task.Pending || tk.HandOffTarget != "us-east" {
		t.Fatalf("accepted without the cancel: %s target %q, want still in the outbox", tk.State, tk.HandOffTarget)
	}
	if tk, _ := e.s.Get(e.ctx, b); tk.State != task.Canceled {
		t.Fatalf("refused after a cancel request: %s, want CANCELED", tk.State)
	}
	errs, err = e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: a, Accepted: true, Canceled: true}})
	if err != nil || errs[0] != nil {
		t.Fatalf("accepted-canceled: %v %v", errs, err)
	}
	if tk, _ := e.s.Get(e.ctx, a); tk.State != task.HandedOff || tk.HandedOffTo != "us-east" {
		t.Fatalf("after the cancel went along: %s", tk.State)
	}
	for _, id := range []string{a, b} {
		tr, _ := e.s.Trail(e.ctx, id)
		for _, x := range tr {
			if !task.Legal(x.From, x.To, x.Reason) {
				t.Fatalf("%s: illegal step %+v", id, x)
			}
		}
	}
	if c, _ := e.s.Counts(e.ctx); c.Pending != 0 || c.Canceled != 1 {
		t.Fatalf("counts %+v", c)
	}
	// A bulk cancel reaches tasks in the outbox too.
	res, _ = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", HandOff: "us-east"})
	if n, err := e.s.CancelWhere(e.ctx, queue.Filter{}, "op"); err != nil || n != 1 {
		t.Fatalf("bulk cancel: %d %v", n, err)
	}
	if tk, _ := e.s.Get(e.ctx, res[0].ID); !tk.CancelRequested {
		t.Fatalf("bulk cancel did not request the in-flight task's cancel")
	}
}

// A leader's answers are fenced: once a newer term wrote, the older term's
// answer about a task is refused (ErrFenced) and leaves it as it was, so
// only one term's answers about a task are ever recorded.
func TestHandOffDoneIsFenced(t *testing.T) {
	// A fence is a shard's (its fence key lives in the shard's hash tag):
	// the older term is refused on the shards the newer one has written,
	// which are all of them once the newer leader's loops ran. On three
	// shards the newer answer about ids[0] fences only ids[0]'s shard, so
	// the older term's answers about the others were recorded: one shard
	// here, also on the cluster. That is why a new leader fences every
	// shard before its first write (Store.Fence: TestFenceRaisesEveryShard).
	e := newEnv(t, oneShard)
	ids := e.outboxIDs(3)
	older, newer := queue.Fence{Name: "region", Token: 4}, queue.Fence{Name: "region", Token: 5}
	errs, err := e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: ids[0], Accepted: true}}, newer)
	if err != nil || errs[0] != nil {
		t.Fatalf("the newer term's answer: %v %v", errs, err)
	}
	// The older term got a refusal for ids[1]: recording it would place the
	// task again here.
	errs, err = e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: ids[1], Accepted: false}, {ID: ids[2], Accepted: true}}, older)
	if !errors.Is(err, queue.ErrFenced) || !errors.Is(errs[0], queue.ErrFenced) || !errors.Is(errs[1], queue.ErrFenced) {
		t.Fatalf("the older term's answers: %v %v, want ErrFenced", errs, err)
	}
	if diff := cmp.Diff(sortedIDs(ids[1:]), e.outboxDue()); diff != "" {
		t.Fatalf("the outbox after a fenced answer (-want +got):\n%s", diff)
	}
	for _, id := range ids[1:] {
		if tk, err := e.s.Get(e.ctx, id); err != nil || tk.State != task.Pending || tk.HandOffTarget != "us-east" {
			t.Fatalf("%s after a fenced answer: %+v %v", id, tk, err)
		}
	}
	if tk, err := e.s.Get(e.ctx, ids[0]); err != nil || tk.State != task.HandedOff {
		t.Fatalf("%s answered by the newer term: %+v %v", ids[0], tk, err)
	}
	// Without a fence (tools, tests) the answer is recorded as before.
	if err := e.s.HandOffDone(e.ctx, ids[2], true); err != nil {
		t.Fatal(err)
	}
}

// Store.Fence, which a new leader runs before its first write, closes what
// TestHandOffDoneIsFenced shows: once it ran, the older term is refused on
// every shard, whichever the newer term has written to (on the cluster, the
// ids below spread over its shards; one answer per call reaches one shard).
func TestFenceRaisesEveryShard(t *testing.T) {
	e := newEnv(t)
	ids := e.outboxIDs(12)
	older, newer := queue.Fence{Name: "region", Token: 4}, queue.Fence{Name: "region", Token: 5}
	if err := e.s.Fence(e.ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Fence(e.ctx, newer); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		errs, err := e.s.HandOffDoneMany(e.ctx, []queue.HandOffAnswer{{ID: id, Accepted: true}}, older)
		if !errors.Is(err, queue.ErrFenced) || !errors.Is(errs[0], queue.ErrFenced) {
			t.Fatalf("the older term's answer about %s: %v %v, want ErrFenced", id, errs, err)
		}
	}
	if diff := cmp.Diff(sortedIDs(ids), e.outboxDue()); diff != "" {
		t.Fatalf("the outbox after fenced answers (-want +got):\n%s", diff)
	}
	if err := e.s.Fence(e.ctx, older); !errors.Is(err, queue.ErrFenced) {
		t.Fatalf("fencing with the older token: %v, want ErrFenced", err)
	}
	if err := e.s.Fence(e.ctx, newer); err != nil {
		t.Fatalf("fencing again with the same token: %v", err)
	}
}
