package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// refusal is the fake of the ax server's Redis gate refusing a call to a
// silent master: an error that says it was not sent (NotSent).
type refusal struct{}

func (refusal) Error() string { return "redis: not tried (test)" }

func (refusal) NotSent() bool { return true }

func (refusal) Timeout() bool { return true }

func (refusal) Temporary() bool { return true }

// maybeRan is an error after the command was sent (and here, ran): a read
// timeout, a cut connection.
var maybeRan = errors.New("i/o timeout (test): the command may have run")

// shardHook refuses, without sending them, the commands naming a key of
// the shards in down (their hash tag); with ran, it sends them and then
// answers maybeRan instead. It counts what it refused and what it let
// through to each shard.
type shardHook struct {
	down    map[int]bool
	ran     bool
	refused atomic.Int64
	sent    [8]atomic.Int64 // per shard, commands naming its keys let through
}

func (h *shardHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *shardHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		shard := -1
		for _, a := range cmd.Args() {
			s, _ := a.(string)
			for i := range h.sent {
				if strings.Contains(s, fmt.Sprintf("{eu-west:%d}", i)) {
					shard = i
				}
			}
		}
		if shard < 0 {
			return next(ctx, cmd)
		}
		if h.down[shard] && !h.ran {
			h.refused.Add(1)
			cmd.SetErr(refusal{})
			return refusal{}
		}
		h.sent[shard].Add(1)
		err := next(ctx, cmd)
		if h.down[shard] && err == nil {
			cmd.SetErr(maybeRan)
			return maybeRan
		}
		return err
	}
}

func (h *shardHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// spillEnv is a store on 3 shards whose client refuses shard 1's calls
// unsent (the others', and every server call, go through).
func spillEnv(t *testing.T) (*env, *shardHook) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	h := &shardHook{down: map[int]bool{1: true}}
	e.rdb.AddHook(h)
	return e, h
}

// past runs fn with every shard answering (and nothing counted).
func (h *shardHook) past(fn func()) {
	down, sent := h.down, h.sent[1].Load()
	h.down = nil
	defer func() { h.down = down; h.sent[1].Store(sent) }()
	fn()
}

// backlogs is each shard's count of tenant t's unfinished tasks, read
// past the hook.
func (e *env) backlogs(h *shardHook, tenant string) []int {
	e.t.Helper()
	out := make([]int, e.s.Shards())
	h.past(func() { e.backlogsInto(tenant, out) })
	return out
}

func (e *env) backlogsInto(tenant string, out []int) {
	e.t.Helper()
	for i := range e.s.Shards() {
		n, err := e.rdb.HGet(e.ctx, e.s.Prefix(i)+"bl", queue.BacklogTenant(tenant)).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			e.t.Fatal(err)
		}
		out[i] = n
	}
}

// An unkeyed submit whose shard refuses the call unsent is stored on
// another shard, under a new id naming it, exactly once; one after whose
// error the script may have run is not tried again anywhere.
func TestSubmitRefusedUnsentGoesToTheNextShard(t *testing.T) {
	e, h := spillEnv(t)
	ids := map[string]bool{}
	for range 6 {
		res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true})
		if err != nil || res[0].Err != nil {
			t.Fatalf("a submit with shard 1 refusing: %v %+v", err, res)
		}
		id := res[0].ID
		if sh, _ := e.s.ShardOf(id); sh == 1 {
			t.Fatalf("task %s stored on the refusing shard", id)
		}
		if ids[id] {
			t.Fatalf("id %s answered twice", id)
		}
		ids[id] = true
		if st := e.state(id); st != task.Ready {
			t.Fatalf("task %s is %s, want READY", id, st)
		}
	}
	if h.refused.Load() == 0 {
		t.Fatal("no submit was aimed at shard 1: the test shows nothing")
	}
	if h.sent[1].Load() != 0 {
		t.Fatalf("%d commands reached shard 1", h.sent[1].Load())
	}
	if bl := e.backlogs(h, "default"); bl[0]+bl[2] != 6 || bl[1] != 0 {
		t.Fatalf("tasks per shard %v for 6 submits, want 6 on shards 0 and 2, none on 1", bl)
	}
	trails, err := e.s.Trails(e.ctx, keys(ids))
	if err != nil {
		t.Fatal(err)
	}
	for id, tr := range trails {
		if len(tr) != 1 {
			t.Errorf("task %s's trail %+v, want its one step of creation", id, tr)
		}
	}
	var ready []*task.Task
	h.past(func() { ready = e.claim("cpu", 100) })
	if len(ready) != 6 {
		t.Fatalf("claimed %d tasks of 6 submitted", len(ready))
	}

	// Every shard refusing: the refusal, nothing stored.
	h.down = map[int]bool{0: true, 1: true, 2: true}
	before := h.refused.Load()
	_, err = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true})
	if !queue.NotSent(err) {
		t.Fatalf("a submit with every shard refusing: %v, want the refusal (NotSent)", err)
	}
	if n := h.refused.Load() - before; n != 3 {
		t.Errorf("a submit with every shard refusing was refused %d times, want 3 (each shard once)", n)
	}
	if bl := e.backlogs(h, "default"); bl[0]+bl[1]+bl[2] != 6 {
		t.Fatalf("tasks per shard %v after a submit every shard refused, want the 6 of before", bl)
	}

	// Shard 1 answering an error after its script ran: not tried again.
	h.down, h.ran = map[int]bool{1: true}, true
	var hit error
	for range 6 {
		if _, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true}); err != nil {
			hit = err
		}
	}
	if !errors.Is(hit, maybeRan) || queue.NotSent(hit) {
		t.Fatalf("submits with shard 1 failing after its script ran: %v, want that error", hit)
	}
	sent1 := h.sent[1].Load()
	if bl := e.backlogs(h, "default"); bl[0]+bl[1]+bl[2] != 12 || int64(bl[1]) != sent1 {
		t.Fatalf("tasks per shard %v after 6 more submits (%d ran on shard 1, then failed), want 12, shard 1's each once", bl, sent1)
	}
}

// A batch: the tasks of the refusing shard go to the next one, each once;
// the others stay where they were put.
func TestSubmitBatchRefusedUnsentGoesToTheNextShard(t *testing.T) {
	e, h := spillEnv(t)
	batch := make([]queue.NewTask, 30)
	sp := e.spec()
	for i := range batch {
		batch[i] = queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true}
	}
	res, err := e.s.Submit(e.ctx, batch...)
	if err != nil {
		t.Fatalf("a batch with shard 1 refusing: %v", err)
	}
	ids := map[string]bool{}
	per := make([]int, 3)
	for _, r := range res {
		if r.Err != nil || ids[r.ID] {
			t.Fatalf("a batch task: %+v (again: %v)", r, ids[r.ID])
		}
		ids[r.ID] = true
		sh, _ := e.s.ShardOf(r.ID)
		per[sh]++
	}
	if h.refused.Load() != 1 || per[1] != 0 || per[2] != 20 || per[0] != 10 {
		// Round robin puts 10 on each; shard 1's 10 move to shard 2.
		t.Fatalf("shard 1 refused %d calls; tasks per shard by id %v, want 1 and [10 0 20]", h.refused.Load(), per)
	}
	if bl := e.backlogs(h, "default"); bl[0] != 10 || bl[1] != 0 || bl[2] != 20 {
		t.Fatalf("tasks per shard %v, want [10 0 20]", bl)
	}
	var got []*task.Task
	h.past(func() { got = e.claim("cpu", 100) })
	if len(got) != 30 {
		t.Fatalf("claimed %d tasks of a batch of 30", len(got))
	}
}

// A keyed submit stays on its key's shard (where a retry looks for the
// key): refused, it is the refusal, nothing stored anywhere; so is a task
// with its own id (a hand-off) on that shard, and a batch holding either.
func TestSubmitKeyedOnARefusingShardIsRefused(t *testing.T) {
	e, h := spillEnv(t)
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); e.s.ShardForKey("default", k) == 1 {
			key = k
		}
	}
	keyed := queue.NewTask{Spec: e.spec(func(s *task.Spec) { s.IdempotencyKey = key }), Pool: "cpu", Pinned: true}
	handoff := queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true, ID: e.s.NewID(1, e.clock.Now())}
	for name, batch := range map[string][]queue.NewTask{
		"keyed": {keyed}, "with its own id": {handoff},
		"a batch with a keyed one": {{Spec: e.spec(), Pool: "cpu"}, keyed, {Spec: e.spec(), Pool: "cpu"}},
	} {
		before := h.refused.Load()
		if _, err := e.s.Submit(e.ctx, batch...); !queue.NotSent(err) {
			t.Fatalf("%s on the refusing shard: %v, want the refusal", name, err)
		}
		if h.refused.Load() == before {
			t.Fatalf("%s: nothing refused", name)
		}
	}
	if bl := e.backlogs(h, "default"); bl[1] != 0 {
		t.Fatalf("tasks per shard %v: some on the refusing shard", bl)
	}
	h.down = nil
	res, err := e.s.Submit(e.ctx, keyed)
	if err != nil || res[0].Err != nil || res[0].Duplicate {
		t.Fatalf("the keyed submit once shard 1 answers: %v %+v, want a new task", err, res)
	}
	if sh, _ := e.s.ShardOf(res[0].ID); sh != 1 {
		t.Fatalf("the keyed task is on shard %d, want its key's, 1", sh)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
