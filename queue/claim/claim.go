package claim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// Claim takes up to N READY tasks of a pool (READY→RUNNING), each with a
// lease token in Task.LeaseToken.
func (s *Claimer) Claim(ctx context.Context, req queue.ClaimRequest) ([]*task.Task, error) {
	c, err := s.ClaimTasks(ctx, req)
	return c.Tasks, err
}

// ClaimTasks is Claim that also says when parked tasks may be released and
// whether what runs counts (Claimed.Counts).
func (s *Claimer) ClaimTasks(ctx context.Context, req queue.ClaimRequest) (queue.Claimed, error) {
	var c queue.Claimed
	n := queue.ClampBatch(req.N)
	served := req.Types.Code
	if req.Types.All() {
		served = "*"
	} else if served == "," {
		return c, nil // serves no type
	}
	price := ""
	if req.Price > 0 {
		price = strconv.FormatFloat(req.Price, 'f', -1, 64)
	}
	var out []*task.Task
	start := s.NextShard()
	if s.Shards() > 1 {
		if k, ok := s.takeOwed(req.Pool, n); ok {
			start = k
		}
	}
	room := req.Room
	for i := 0; i < s.Shards() && len(out) < n && !c.Full; i++ {
		shard := (start + i) % s.Shards()
		roomArg := ""
		if req.Room > 0 {
			roomArg = strconv.Itoa(room)
		}
		res, err := s.Run(ctx, s.Client(), queue.Scripts.Claim, s.KeysWith(shard, queue.PricesKey(s.Prefix(shard))), s.Clock(), req.Pool, req.Worker,
			n-len(out), s.Options().Lease.Milliseconds(), s.Options().AgingStep.Milliseconds(), price,
			s.Options().Defaults.Timeout.Milliseconds(), served, queue.ClaimSkip, roomArg).Slice()
		if err != nil {
			c.Tasks = out
			return c, fmt.Errorf("queue: claim: %w", err)
		}
		if len(res) < 4 {
			continue
		}
		res = claimMarks(res, &c)
		now := record.MsTime(queue.ToStr(res[0]))
		first, _ := strconv.ParseInt(queue.ToStr(res[1]), 10, 64)
		paid, _ := strconv.ParseFloat(queue.ToStr(res[2]), 64)
		if p := queue.ToStr(res[3]); p != "" {
			d := time.Duration(queue.ToInt(p)) * time.Millisecond
			if c.Parked == 0 || d < c.Parked {
				c.Parked = max(d, time.Millisecond)
			}
		}
		for j := 4; j+1 < len(res); j += 2 {
			pairs, _ := res[j+1].([]any)
			t := record.DecodePairs(queue.ToStr(res[j]), pairs, s.Options().Defaults)
			if queue.MayBeLazy(t) {
				queue.MarkLazyReady(t) // the claim wrote rs, rt, eq as well
			}
			// What the claim set in Redis, applied to the copy read before it.
			t.State, t.Reason, t.Worker = task.Running, task.ReasonClaimed, req.Worker
			t.LeaseToken = strconv.FormatInt(first+int64((j-4)/2), 10)
			if now != nil {
				sa := *now
				t.StartedAt = &sa
			}
			t.Attempts++
			t.PricePerHour = paid
			t.HeldBy = s.Options().Region
			room -= t.SlotMilli()
			out = append(out, t)
		}
		if req.Room > 0 && room <= 0 {
			c.Full = true
		}
	}
	c.Tasks = out
	return c, nil
}

// claimMarks takes the trailing marks off a claim's answer: '~' the claim
// stopped at a task its room could not fit (Full), '!' the pool has a
// fair share (Counts).
func claimMarks(res []any, c *queue.Claimed) []any {
	for len(res) > 4 {
		m, ok := res[len(res)-1].(string)
		switch {
		case ok && m == "~":
			c.Full = true
		case ok && m == "!":
			c.Counts = true
		default:
			return res
		}
		res = res[:len(res)-1]
	}
	return res
}

// WaitForWork blocks until a wake-up marker for pool appears or timeout
// passes. It returns true when woken. A claimer that waits again and again
// keeps a Waker instead (on a Redis Cluster this call sets one up and tears
// it down each time).
func (s *Claimer) WaitForWork(ctx context.Context, pool string, timeout time.Duration) (bool, error) {
	w := s.NewWaker(pool)
	defer w.Close()
	return w.Wait(ctx, timeout)
}

// Heartbeat extends every lease a worker holds and records the worker (with
// its slots and the task types it serves; the zero Types: not said) as
// alive in its pool, one call per shard. It returns the tasks to stop.
func (s *Claimer) Heartbeat(ctx context.Context, worker, pool string, slots int, types queue.Types, held []queue.Lease) ([]queue.Stop, error) {
	byShard := make([][]any, s.Shards())
	var stops []queue.Stop
	for _, l := range held {
		shard, err := s.ShardOf(l.ID)
		if err != nil {
			stops = append(stops, queue.Stop{Lease: l, Why: queue.StopLost})
			continue
		}
		byShard[shard] = append(byShard[shard], l.ID, l.Token, progressArg(l.Progress))
	}
	for shard, items := range byShard {
		if shard != 0 && len(items) == 0 {
			continue // liveness lives in shard 0
		}
		p := s.Prefix(shard)
		// The types live where the leader reads liveness: shard 0.
		typ := "-"
		if shard == 0 {
			typ = types.Code
		}
		argv := append([]any{s.Clock(), worker, s.Options().Lease.Milliseconds(), slots, len(items) / 3,
			s.Options().Defaults.Timeout.Milliseconds(), typ}, items...)
		out, err := s.Run(ctx, s.Client(), queue.Scripts.Heartbeat, s.KeysWith(shard, queue.WorkersKey(p, pool), queue.SlotsKey(p, pool),
			queue.TypesKey(p, pool)), argv...).Slice()
		if err != nil {
			return nil, fmt.Errorf("queue: heartbeat: %w", err)
		}
		for i := 0; i+2 < len(out); i += 3 {
			stops = append(stops, queue.Stop{Lease: queue.Lease{ID: queue.ToStr(out[i]), Token: queue.ToStr(out[i+1])}, Why: queue.StopReason(queue.ToStr(out[i+2]))})
		}
	}
	return stops, nil
}

// Complete records successes (RUNNING→SUCCESS) in batches. The returned
// slice holds nil or ErrLeaseLost per completion.
func (s *Claimer) Complete(ctx context.Context, cs ...queue.Completion) ([]error, error) {
	errs := make([]error, len(cs))
	byShard := make([][]int, s.Shards())
	for i, c := range cs {
		shard, err := s.ShardOf(c.ID)
		if err != nil {
			errs[i] = err
			continue
		}
		byShard[shard] = append(byShard[shard], i)
	}
	for shard, idx := range byShard {
		for start := 0; start < len(idx); start += queue.MaxBatch {
			part := idx[start:min(start+queue.MaxBatch, len(idx))]
			argv := make([]any, 0, 5+4*len(part))
			argv = append(argv, s.Clock(), len(part), s.Options().RunTimePairs, s.Alpha(), s.Options().RetainSuccess.Milliseconds())
			for _, i := range part {
				argv = append(argv, cs[i].ID, cs[i].Token, cs[i].Result, progressArg(cs[i].Progress))
			}
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Complete, s.KeysWith(shard, queue.RunTimesKey(s.Prefix(shard))), argv...).Slice()
			if err != nil {
				return nil, fmt.Errorf("queue: complete: %w", err)
			}
			for k, i := range part {
				if queue.ToInt(out[k]) != queue.CodeOK {
					errs[i] = queue.ErrLeaseLost
				}
			}
			if len(out) > len(part)+1 && s.Shards() > 1 {
				s.owe(queue.ToStr(out[len(part)]), shard, queue.ToInt(out[len(part)+1]))
			}
		}
	}
	return errs, nil
}

// owe records that pool's shard owes a floor slots: a tenant with work
// waiting there is below its floor by that many after a completion. The
// store's next claims of the pool, for that many slots, start on that
// shard, so the slots the completions freed go to the floor
// (docs/fairness.md, "Shards"), not to whatever shard the claims' turn is
// at; slots freed one at a time are claimed one at a time.
func (s *Claimer) owe(pool string, shard, slots int) {
	if slots <= 0 {
		return
	}
	s.owedMu.Lock()
	if s.owed == nil {
		s.owed = map[string]owedFloor{}
	}
	s.owed[pool] = owedFloor{shard, slots}
	s.owedMu.Unlock()
}

// takeOwed returns the shard where pool owes a floor, counting a claim of
// n slots against what it owes.
func (s *Claimer) takeOwed(pool string, n int) (int, bool) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	o, ok := s.owed[pool]
	if !ok {
		return 0, false
	}
	if o.slots -= n; o.slots > 0 {
		s.owed[pool] = o
	} else {
		delete(s.owed, pool)
	}
	return o.shard, true
}

// Fail records a failed attempt: retry with backoff and jitter while retries
// are left and the error is retryable, else FAILED into the dead set. It
// returns the new state and, for PENDING, when the retry is due.
func (s *Claimer) Fail(ctx context.Context, f queue.Failure) (task.State, time.Time, error) {
	shard, err := s.ShardOf(f.ID)
	if err != nil {
		return "", time.Time{}, err
	}
	reason := f.Reason
	if reason == "" {
		reason = task.ReasonHandlerError
	}
	retry := "0"
	if f.Retryable {
		retry = "1"
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Fail, s.KeysWith(shard, queue.RunTimesKey(s.Prefix(shard))), s.Clock(), f.ID, f.Token,
		record.Clean(f.Error, task.MaxErrorLen), retry, rand.IntN(1000), s.Options().RetainDead.Milliseconds(),
		s.Options().RetainCanceled.Milliseconds(), reason, s.Options().Defaults.MaxRetries,
		s.Options().Defaults.RetryBase.Milliseconds(), s.Options().Defaults.RetryCap.Milliseconds(),
		s.Options().RunTimePairs, s.Alpha()).Slice()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("queue: fail: %w", err)
	}
	if err := leaseResult(f.ID, out); err != nil {
		return "", time.Time{}, err
	}
	var due time.Time
	if t := record.MsTime(queue.ToStr(out[2])); t != nil && queue.ToStr(out[2]) != "0" {
		due = *t
	}
	return record.StateOf(queue.ToStr(out[1])), due, nil
}

// Return gives a RUNNING task back without spending a retry (graceful
// shutdown, preemption): READY at once with its original enqueue time, or
// after delay.
func (s *Claimer) Return(ctx context.Context, id, token, reason string, delay time.Duration) (task.State, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Ret, s.KeysWith(shard), s.Clock(), id, token, reason,
		delay.Milliseconds(), s.Options().RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: return: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return record.StateOf(queue.ToStr(out[1])), nil
}

func leaseResult(id string, out []any) error {
	switch queue.ToInt(out[0]) {
	case queue.CodeOK:
		return nil
	case queue.CodeLeaseLost:
		return fmt.Errorf("%w: task %s is %s", queue.ErrLeaseLost, id, record.StateOf(queue.ToStr(out[1])))
	default:
		return fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
}
