package batch

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// BenchmarkMemberLifecycle is the store's work for n tasks, submitted in
// one call placed in a pool, claimed, completed, as plain tasks
// (plain) or as the members of one batch (member: the batch's record,
// the members' ids recorded, each end queued by complete.lua and counted
// at the home by the reporter, the callback stored), the two alternating
// in each iteration on one Redis; it reports both per task and their
// ratio. docs/benchmarks.md.
func BenchmarkMemberLifecycle(b *testing.B) {
	const n = 1000
	bs, _, st := newBatches(b)
	ctx := context.Background()
	submit := func(ctx context.Context, specs []*task.Spec) ([]string, []error, error) {
		nts := make([]queue.NewTask, len(specs))
		for i, sp := range specs {
			c := *sp
			if err := c.Normalize(task.DefaultDefaults(), bs.cfg.Now()); err != nil {
				return nil, nil, err
			}
			nts[i] = queue.NewTask{Spec: &c, Pool: "cpu"}
		}
		res, err := st.Submitter().Submit(ctx, nts...)
		if err != nil {
			return nil, nil, err
		}
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.ID
		}
		return ids, make([]error, len(res)), nil
	}
	specs := make([]*task.Spec, n)
	var took [2]time.Duration
	b.ResetTimer()
	for k := range 2 * b.N {
		member := k%2 == 1
		began := time.Now()
		for i := range specs {
			specs[i] = &task.Spec{Type: "noop"}
		}
		if member {
			if _, _, err := bs.Create(ctx, &Request{Tenant: "default", Members: specs, OnComplete: &task.Spec{Type: "done"}}, submit); err != nil {
				b.Fatal(err)
			}
		} else if _, _, err := submit(ctx, specs); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < n; {
			held, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 200})
			if err != nil || len(held) == 0 {
				b.Fatalf("claim: %d %v", len(held), err)
			}
			cs := make([]queue.Completion, len(held))
			for i, t := range held {
				cs[i] = queue.Completion{ID: t.ID, Token: t.LeaseToken}
			}
			if _, err := st.Claimer().Complete(ctx, cs...); err != nil {
				b.Fatal(err)
			}
			done += len(held)
		}
		if member {
			for more := true; more; {
				var err error
				if more, err = bs.reportShard(ctx, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		took[k%2] += time.Since(began)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*n) }
	b.ReportMetric(per(took[0]), "plain-µs/task")
	b.ReportMetric(per(took[1]), "member-µs/task")
	b.ReportMetric(float64(took[1])/float64(took[0]), "member/plain")
}
