package submit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// coldEligible reports whether the task goes to the cold tier.
func (s *Submitter) coldEligible(t queue.NewTask, now time.Time) bool {
	sp := t.Spec
	return s.Options().ColdHorizon > 0 && t.ID == "" && sp.RunAt != nil && !sp.RunAt.Before(now.Add(s.Options().ColdHorizon)) &&
		sp.IdempotencyKey == "" && sp.UniqueKey == "" && sp.DebounceKey == "" && t.HandOff == "" && t.History == nil && !t.Returning &&
		t.Budget == ""
}

// splitCold takes the cold tasks out of idx.
func (s *Submitter) splitCold(tasks []queue.NewTask, idx []int) (cold, hot []int) {
	if s.Options().ColdHorizon <= 0 {
		return nil, idx
	}
	now := s.Now()
	for _, i := range idx {
		if s.coldEligible(tasks[i], now) {
			cold = append(cold, i)
		} else {
			hot = append(hot, i)
		}
	}
	return cold, hot
}

// submitCold stores tasks idx of one shard in the cold tier, one template
// per distinct (spec, pool, pinned) in the call.
func (s *Submitter) submitCold(ctx context.Context, sc redis.Scripter, shard int, tasks []queue.NewTask, ids []string, idx []int, res []queue.SubmitResult) error {
	// Templates are told apart by content: tasks of one call usually differ
	// only in their due time (one spec each, the same fields).
	type ptrKey struct {
		sp     *task.Spec
		pool   string
		pinned bool
	}
	byPtr := map[ptrKey]int{}
	byText := map[string]int{}
	var specs []any
	refs := make([]int, len(idx))
	var b strings.Builder
	for k, i := range idx {
		t := tasks[i]
		pk := ptrKey{t.Spec, t.Pool, t.Pinned && t.Pool != ""}
		ref, ok := byPtr[pk]
		if !ok {
			f := record.SpecFields(t.Spec, s.Options().Defaults)
			if pk.pinned {
				f = append(f, "pn", "1", "po", t.Pool)
			}
			f = append(f, "pr", strconv.Itoa(*t.Spec.Priority))
			b.Reset()
			for _, v := range f {
				b.WriteString(v.(string))
				b.WriteByte(0)
			}
			if ref, ok = byText[b.String()]; !ok {
				specs = append(specs, len(f)/2)
				specs = append(specs, f...)
				ref = len(byText) + 1
				byText[b.String()] = ref
			}
			byPtr[pk] = ref
		}
		refs[k] = ref
	}
	argv := make([]any, 0, 4+len(specs)+1+3*len(idx))
	argv = append(argv, s.Clock(), "submit", queue.ColdBucket.Milliseconds(), len(byText))
	argv = append(argv, specs...)
	argv = append(argv, len(idx))
	for k, i := range idx {
		argv = append(argv, ids[i], refs[k], tasks[i].Spec.RunAt.UnixMilli())
	}
	argv = append(argv, s.backlogCaps(tasks, idx))
	codes, err := s.Run(ctx, sc, queue.Scripts.Cold, s.ColdKeys(shard), argv...).Text()
	if err != nil {
		return fmt.Errorf("queue: submit (cold): %w", err)
	}
	if len(codes) != len(idx) {
		return fmt.Errorf("queue: submit (cold): %d results for %d tasks", len(codes), len(idx))
	}
	for k, i := range idx {
		r := queue.SubmitResult{ID: ids[i], State: task.Pending}
		switch codes[k] {
		case record.ItemExists:
			r.Err = task.ErrExists
		case record.ItemBacklogFull:
			r = queue.SubmitResult{ID: ids[i], Err: queue.ErrBacklogFull}
		case record.ItemBacklogBytes:
			r = queue.SubmitResult{ID: ids[i], Err: queue.ErrBacklogBytesFull}
		}
		res[i] = r
	}
	return nil
}
