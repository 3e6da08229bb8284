package fanout

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// One region's listing with several shards and more dead letters per shard
// than one read takes: the merge over shards and reads keeps the order
// (failure time, then id, both descending; many share a millisecond), and
// the cursor pages through it once.
func TestFanoutLocalDeadLettersAcrossShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const aws, poolCPU = "aws-use1", "cpu"
	r := testenv.StartRedis(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli())
	st, err := store.New(r.Client(), queue.Options{Region: aws, Shards: 3, Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	const total = 1800 // 600 per shard: more than deadLetterChunk
	var batch []queue.NewTask
	for i := range total {
		zero := 0
		sp := &task.Spec{Type: "shard.dead", Tenant: []string{"a", "b"}[i%2], MaxRetries: &zero}
		if err := sp.Normalize(task.DefaultDefaults(), time.UnixMilli(clock.Load())); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, queue.NewTask{Spec: sp, Pool: poolCPU})
	}
	if _, err := st.Submitter().Submit(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	var held []*task.Task
	for len(held) < total {
		got, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolCPU, Worker: "w", N: 1000})
		if err != nil || len(got) == 0 {
			t.Fatalf("claim: %d %v", len(got), err)
		}
		held = append(held, got...)
	}
	tenant := map[string]string{}
	marks := map[string]dlqMark{}
	for i, tk := range held {
		// Three failures per millisecond, in no particular id order.
		clock.Store(clock.Load() + int64(i%3/2))
		if s, _, err := st.Claimer().Fail(ctx, queue.Failure{ID: tk.ID, Token: tk.LeaseToken, Error: "x"}); err != nil || s != task.Failed {
			t.Fatalf("fail: %s %v", s, err)
		}
		tenant[tk.ID] = tk.Tenant
		marks[tk.ID] = dlqMark{ms: clock.Load(), id: tk.ID}
	}
	want := func(q dlqQuery) []string {
		var out []string
		for id := range marks {
			if q.Tenant == "" || tenant[id] == q.Tenant {
				out = append(out, id)
			}
		}
		slices.SortFunc(out, func(a, b string) int {
			if marks[a].newer(marks[b]) {
				return -1
			}
			return 1
		})
		return out
	}
	n := New(Config{Store: st.Tasks()})
	for _, tc := range []struct {
		q     dlqQuery
		limit int
	}{{dlqQuery{}, 1000}, {dlqQuery{}, 97}, {dlqQuery{DLQQuery: DLQQuery{Tenant: "b"}}, 333}} {
		var got []string
		var after *dlqMark
		for pages := 0; ; pages++ {
			ts, more, err := n.localDeadLetters(ctx, tc.q, after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				got = append(got, tk.ID)
			}
			if !more {
				break
			}
			if len(ts) != tc.limit || pages > total {
				t.Fatalf("a page of %d before the end (limit %d)", len(ts), tc.limit)
			}
			m := markOf(ts[len(ts)-1])
			after = &m
		}
		if diff := cmp.Diff(want(tc.q), got); diff != "" {
			t.Fatalf("tenant %q, limit %d (-want +got):\n%s", tc.q.Tenant, tc.limit, diff)
		}
	}
}
