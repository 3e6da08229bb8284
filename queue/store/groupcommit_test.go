package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// TestConcurrentSingleSubmitsAnswerEachCall: many concurrent calls of one
// task each (an API's single submits, which the store sends in groups)
// each get their own answer, and what holds between calls made one after
// the other holds between them: one task per idempotency or unique key
// (the others answered as its duplicates), the tenant's backlog cap never
// passed, every other task created under an id of its own.
func TestConcurrentSingleSubmitsAnswerEachCall(t *testing.T) {
	e := newEnv(t, oneShard)
	const (
		idem, uniq, capped, capN, plain = 16, 8, 16, 10, 24
	)
	type answer struct {
		kind string
		r    queue.SubmitResult
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	start := make(chan struct{})
	submit := func(kind string, nt queue.NewTask) {
		wg.Go(func() {
			<-start
			res, err := e.s.Submit(e.ctx, nt)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(res) != 1 {
				t.Errorf("%s: %v %v", kind, err, res)
				return
			}
			answers = append(answers, answer{kind, res[0]})
		})
	}
	for range idem {
		submit("idem", queue.NewTask{Spec: e.spec(func(s *task.Spec) { s.IdempotencyKey = "k1" })})
	}
	for i := range uniq {
		submit("uniq", queue.NewTask{Spec: e.spec(func(s *task.Spec) {
			s.UniqueKey, s.Payload = "u1", fmt.Appendf(nil, `{"n":%d}`, i)
		})})
	}
	for range capped {
		submit("capped", queue.NewTask{Spec: e.spec(tenant("capped")), BacklogMax: capN})
	}
	for range plain {
		submit("plain", queue.NewTask{Spec: e.spec()})
	}
	close(start)
	wg.Wait()

	created := map[string]int{}
	ids := map[string]map[string]bool{}
	full := 0
	for _, a := range answers {
		if ids[a.kind] == nil {
			ids[a.kind] = map[string]bool{}
		}
		switch {
		case errors.Is(a.r.Err, queue.ErrBacklogFull) && a.kind == "capped":
			full++
		case a.r.Err != nil:
			t.Errorf("%s: %v", a.kind, a.r.Err)
		case !a.r.Duplicate:
			created[a.kind]++
			fallthrough
		default:
			ids[a.kind][a.r.ID] = true
		}
	}
	want := map[string]int{"idem": 1, "uniq": 1, "capped": capN, "plain": plain}
	for kind, n := range want {
		if created[kind] != n {
			t.Errorf("%s: %d created, want %d", kind, created[kind], n)
		}
	}
	if len(ids["idem"]) != 1 || len(ids["uniq"]) != 1 {
		t.Errorf("keyed submits answered with %d and %d ids, want one each", len(ids["idem"]), len(ids["uniq"]))
	}
	if len(ids["plain"]) != plain || full != capped-capN {
		t.Errorf("%d distinct plain ids (want %d), %d refused for the cap (want %d)", len(ids["plain"]), plain, full, capped-capN)
	}
	if got := e.backlog("capped"); got != capN {
		t.Errorf("backlog of capped %d, want %d", got, capN)
	}
	for id := range ids["plain"] {
		if st := e.state(id); st != task.Pending {
			t.Errorf("%s: %s, want PENDING", id, st)
		}
	}
}
