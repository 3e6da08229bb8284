package batch

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

// fakeTasks records the callbacks stored (a stand-in for the federation:
// the store under it is a real Redis).
type fakeTasks struct {
	st *store.Store
	mu sync.Mutex
	// stored counts Enqueue calls that created a task, by id.
	stored map[string]int
	specs  map[string]*task.Spec
}

func (f *fakeTasks) Enqueue(ctx context.Context, _, id string, sp *task.Spec) (bool, error, error) {
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		return false, err, nil
	}
	res, err := f.st.Submitter().Submit(ctx, queue.NewTask{ID: id, Spec: sp})
	if err != nil {
		return false, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if res[0].Err == nil {
		f.stored[id]++
		f.specs[id] = sp
	}
	return res[0].Err == nil, nil, nil
}

func (f *fakeTasks) CancelTask(ctx context.Context, id, by string) error {
	_, err := f.st.Tasks().Cancel(ctx, id, task.ReasonCanceledByUser, by)
	return err
}

func (f *fakeTasks) Proxy(context.Context, string, string, string, any, any) error { return nil }

func newBatches(t testing.TB) (*Batches, *fakeTasks, *store.Store) {
	t.Helper()
	r := testenv.StartRedis(t)
	st, err := store.New(r.Client(), queue.Options{Region: "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	ft := &fakeTasks{st: st, stored: map[string]int{}, specs: map[string]*task.Spec{}}
	return New(st.Batches(), ft, Config{Region: "eu-west"}), ft, st
}

// submitter stores members unplaced in st, as the pipeline would.
func submitter(st *store.Store) SubmitFunc {
	return func(ctx context.Context, specs []*task.Spec) ([]string, []error, error) {
		nts := make([]queue.NewTask, len(specs))
		for i, sp := range specs {
			c := *sp
			if err := c.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
				return nil, nil, err
			}
			nts[i] = queue.NewTask{Spec: &c}
		}
		res, err := st.Submitter().Submit(ctx, nts...)
		if err != nil {
			return nil, nil, err
		}
		ids, errs := make([]string, len(res)), make([]error, len(res))
		for i, r := range res {
			ids[i], errs[i] = r.ID, r.Err
		}
		return ids, errs, nil
	}
}

func TestCallbackRunsOnceWhenEveryMemberEnded(t *testing.T) {
	ctx := context.Background()
	b, ft, st := newBatches(t)
	members := []*task.Spec{{Type: "a"}, {Type: "b"}, {Type: "c"}}
	status, rejected, err := b.Create(ctx, &Request{Name: "nightly", Tenant: "default", Members: members,
		OnComplete: &task.Spec{Type: "done", Payload: json.RawMessage(`{"x":1}`)}, OnSuccess: &task.Spec{Type: "all-ok"}}, submitter(st))
	if err != nil || len(rejected) > 0 {
		t.Fatalf("create: %v %v", err, rejected)
	}
	if status.Counts.Total != 3 || status.State != apiv1.BatchRunning || status.Callback != apiv1.BatchCallbackWaiting {
		t.Fatalf("status %+v", status)
	}
	ids, _ := b.store.MemberIDs(ctx, status.ID, 0, 0)
	for _, id := range ids[:2] {
		if err := ft.CancelTask(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.reportShard(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if len(ft.stored) != 0 {
		t.Fatalf("callback before the last member ended: %v", ft.stored)
	}
	if err := ft.CancelTask(ctx, ids[2], "test"); err != nil {
		t.Fatal(err)
	}
	// The last end reported twice (a leader that stopped before trimming):
	// counted once, the callback stored once.
	ends, _, _ := b.store.Reported(ctx, 0, 10)
	if _, err := b.reportShard(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := b.ApplyEnds(ctx, ends); err != nil || n != 0 {
		t.Fatalf("ends again: applied %d, %v", n, err)
	}
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	cid := callbackID(status.ID, onComplete)
	if ft.stored[cid] != 1 || len(ft.stored) != 1 {
		t.Fatalf("callbacks stored %v, want %s once (no on_success: members were canceled)", ft.stored, cid)
	}
	var out apiv1.BatchOutcome
	if err := json.Unmarshal(ft.specs[cid].Payload, &out); err != nil {
		t.Fatal(err)
	}
	if out.Counts.Canceled != 3 || len(out.Canceled) != 3 || string(out.Payload) != `{"x":1}` || out.BatchID != status.ID {
		t.Fatalf("outcome %+v", out)
	}
	got, err := b.Status(ctx, status.ID, "")
	if err != nil || got.State != apiv1.BatchCompleted || got.Callback != apiv1.BatchCallbackSent || got.Counts.Unfinished != 0 {
		t.Fatalf("status %+v %v", got, err)
	}
	if _, err := b.Status(ctx, status.ID, "team-b"); err != ErrNotFound {
		t.Fatalf("another tenant's batch: %v", err)
	}
}

// A server stopped between the batch's completion and storing its
// callback: the callback is due, and Recover stores it once.
func TestRecoverStoresADueCallback(t *testing.T) {
	ctx := context.Background()
	b, ft, st := newBatches(t)
	status, _, err := b.Create(ctx, &Request{Tenant: "default", Members: []*task.Spec{{Type: "a"}}, OnComplete: &task.Spec{Type: "done"}}, submitter(st))
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := b.store.MemberIDs(ctx, status.ID, 0, 0)
	if _, err := st.Tasks().Cancel(ctx, ids[0], task.ReasonCanceledByUser, "t"); err != nil {
		t.Fatal(err)
	}
	ends, n, _ := b.store.Reported(ctx, 0, 10)
	if ap, err := b.store.Apply(ctx, status.ID, ends, false); err != nil || !ap.Completed || ap.Callback != "due" {
		t.Fatalf("apply %+v %v", ap, err)
	}
	_ = b.store.Trim(ctx, 0, n)
	for range 2 {
		if err := b.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ft.stored[callbackID(status.ID, onComplete)] != 1 {
		t.Fatalf("stored %v", ft.stored)
	}
}

func TestCreateRefusesBadInputAndStoresNothing(t *testing.T) {
	ctx := context.Background()
	b, _, st := newBatches(t)
	neg := -1
	many := make([]*task.Spec, apiv1.MaxBatchMembers+1)
	for i := range many {
		many[i] = &task.Spec{Type: "a"}
	}
	for _, c := range []struct {
		name    string
		members []*task.Spec
		cb      *task.Spec
		field   string
	}{
		{"none", nil, nil, "tasks"},
		{"10001", many, nil, "tasks"},
		{"bad member", []*task.Spec{{Type: "a"}, {Type: "b", MaxRetries: &neg}}, nil, "tasks[1].max_retries"},
		{"keyed member", []*task.Spec{{Type: "a", Grouping: task.Grouping{UniqueKey: "k"}}}, nil, "tasks[0].unique_key"},
		{"bad on_complete", []*task.Spec{{Type: "a"}}, &task.Spec{Type: ""}, "on_complete.type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := b.Create(ctx, &Request{Tenant: "default", Members: c.members, OnComplete: c.cb}, submitter(st))
			fe, ok := err.(*task.FieldError)
			if !ok || fe.Field != c.field {
				t.Fatalf("err %v, want field %s", err, c.field)
			}
		})
	}
	if n, _ := st.Client().DBSize(ctx).Result(); n != 0 {
		keys, _ := st.Client().Keys(ctx, "*").Result()
		t.Fatalf("%d keys stored: %v", n, keys)
	}
}
