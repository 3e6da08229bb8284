package batchstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// ErrNotFound: no batch with this id in this region (or it expired).
var ErrNotFound = errors.New("queue: batch not found")

var scripts = struct{ add, member *queue.Script }{
	add:    queue.Load("batch_add"),
	member: queue.Load("batch_member"),
}

// Callback states (field cb).
const (
	CallbackNone    = "none" // the batch has no callback
	CallbackWaiting = ""     // not complete yet
	CallbackDue     = "due"  // complete: its callback is to be sent
	CallbackSent    = "sent" // its callback task was stored
)

// Batch states.
const (
	StateRunning   = "RUNNING"
	StateCompleted = "COMPLETED"
)

// Batch is a batch as stored.
type Batch struct {
	ID, Tenant, Name string
	State            string
	// Members is how many members were recorded; Sealed says every
	// member is (the create finished).
	Members                     int
	Sealed                      bool
	Succeeded, Failed, Canceled int
	Callback                    string          // callback state
	Callbacks                   json.RawMessage // as Create stored them
	CancelRequested             bool
	CreatedAt                   time.Time
	CompletedAt                 *time.Time
}

// End is one member's end, as a shard reported it.
type End struct {
	Batch, Member string
	Code          string // S, F or C
}

// Applied is what Apply did.
type Applied struct {
	Applied   int    // ends counted for the first time
	Completed bool   // this call completed the batch
	State     string // the batch's state after it
	Callback  string // its callback state after it
}

// Batches stores batches.
//
// Its key layout (every key of one batch shares the hash tag {batch:<id>}, so
// its scripts stay on one Redis Cluster slot):
//
//	ax:{batch:<id>}:b    HASH   tn tenant, nm name, st RUNNING|COMPLETED,
//	                            n members recorded, sl sealed ('1': every
//	                            member recorded), ok/fl/cx members ended
//	                            SUCCESS/FAILED/CANCELED, ca/fa created and
//	                            completed (ms), d callbacks (JSON), cb
//	                            callback state (none, '', due, sent), cq
//	                            cancel requested
//	ax:{batch:<id>}:ids  LIST   member ids, in the order given
//	ax:{batch:<id>}:m    HASH   member id → S, F or C: its first reported end
//	ax:{batches}:idx     ZSET   batch id → created (ms): listings
//	ax:{batches}:open    ZSET   batch id → created (ms): callbacks not sent yet
//	ax:{s}:bdone         LIST   "<batch> <member> <code>": ends of members this
//	                            shard ended, not yet reported (lib.lua)
type Batches struct{ *queue.Engine }

// New returns the stage over e.
func New(e *queue.Engine) *Batches { return &Batches{Engine: e} }

func (s *Batches) key(id, suffix string) string {
	return s.Options().Prefix + ":{batch:" + id + "}:" + suffix
}
func (s *Batches) idx() string  { return s.Options().Prefix + ":{batches}:idx" }
func (s *Batches) open() string { return s.Options().Prefix + ":{batches}:open" }

// EndsKey is the list of member ends shard has not reported yet.
func (s *Batches) EndsKey(shard int) string { return s.Prefix(shard) + "bdone" }

// Create stores a new batch, RUNNING, with no member yet; callbacks (nil:
// none) are kept as given. It fails with task.ErrExists when the id is held.
func (s *Batches) Create(ctx context.Context, id, tenant, name string, callbacks json.RawMessage) error {
	cb := CallbackWaiting
	if len(callbacks) == 0 {
		cb = CallbackNone
	}
	now := s.Now().UnixMilli()
	ok, err := s.Client().HSetNX(ctx, s.key(id, "b"), "st", StateRunning).Result()
	if err != nil {
		return fmt.Errorf("queue: create batch: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: batch %s", task.ErrExists, id)
	}
	_, err = s.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.key(id, "b"), "tn", tenant, "nm", name, "ca", now, "d", string(callbacks), "cb", cb, "n", 0)
		p.ZAdd(ctx, s.idx(), redis.Z{Score: float64(now), Member: id})
		if cb != CallbackNone {
			p.ZAdd(ctx, s.open(), redis.Z{Score: float64(now), Member: id})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: create batch: %w", err)
	}
	return nil
}

// Delete removes a batch that holds no member (its create was refused).
func (s *Batches) Delete(ctx context.Context, id string) error {
	_, err := s.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.key(id, "b"), s.key(id, "ids"), s.key(id, "m"))
		p.ZRem(ctx, s.idx(), id)
		p.ZRem(ctx, s.open(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: delete batch: %w", err)
	}
	return nil
}

// Add records members of batch id; it returns how many it holds now.
func (s *Batches) Add(ctx context.Context, id string, members []string) (int, error) {
	argv := make([]any, len(members))
	for i, m := range members {
		argv[i] = m
	}
	out, err := s.Run(ctx, s.Client(), scripts.add, []string{s.key(id, "b"), s.key(id, "ids")}, argv...).Slice()
	if err != nil {
		return 0, fmt.Errorf("queue: add batch members: %w", err)
	}
	if queue.BatchMissing(out) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return queue.ToInt(out[1]), nil
}

// Apply counts members' ends of batch id (each member once, whoever
// reports it how often) and, with seal, marks every member recorded; the
// call that sees the last member end completes the batch and sets its
// callback due in the same script (batch_member.lua).
func (s *Batches) Apply(ctx context.Context, id string, ends []End, seal bool) (Applied, error) {
	argv := make([]any, 0, 2+2*len(ends))
	sl := "0"
	if seal {
		sl = "1"
	}
	argv = append(argv, s.Clock(), sl)
	for _, e := range ends {
		argv = append(argv, e.Member, e.Code)
	}
	out, err := s.Run(ctx, s.Client(), scripts.member, []string{s.key(id, "b"), s.key(id, "m")}, argv...).Slice()
	if err != nil {
		return Applied{}, fmt.Errorf("queue: batch ends: %w", err)
	}
	if queue.BatchMissing(out) {
		return Applied{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return Applied{Applied: queue.ToInt(out[1]), Completed: queue.ToInt(out[2]) == 1, State: queue.ToStr(out[3]),
		Callback: queue.ToStr(out[4])}, nil
}

// Get reads batch id.
func (s *Batches) Get(ctx context.Context, id string) (*Batch, error) {
	m, err := s.Client().HGetAll(ctx, s.key(id, "b")).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: get batch: %w", err)
	}
	if len(m) == 0 || m["tn"] == "" {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	num := func(k string) int { v, _ := strconv.Atoi(m[k]); return v }
	b := &Batch{ID: id, Tenant: m["tn"], Name: m["nm"], State: m["st"], Members: num("n"), Sealed: m["sl"] == "1",
		Succeeded: num("ok"), Failed: num("fl"), Canceled: num("cx"), Callback: m["cb"], CancelRequested: m["cq"] == "1"}
	if m["d"] != "" {
		b.Callbacks = json.RawMessage(m["d"])
	}
	if ms, err := strconv.ParseInt(m["ca"], 10, 64); err == nil {
		b.CreatedAt = time.UnixMilli(ms).UTC()
	}
	if ms, err := strconv.ParseInt(m["fa"], 10, 64); err == nil {
		t := time.UnixMilli(ms).UTC()
		b.CompletedAt = &t
	}
	return b, nil
}

// MemberIDs are batch id's member ids from start, at most n (n <= 0: all).
func (s *Batches) MemberIDs(ctx context.Context, id string, start, n int) ([]string, error) {
	stop := int64(-1)
	if n > 0 {
		stop = int64(start + n - 1)
	}
	ids, err := s.Client().LRange(ctx, s.key(id, "ids"), int64(start), stop).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: batch members: %w", err)
	}
	return ids, nil
}

// Ends are the members of batch id that ended, by member id: S, F or C.
func (s *Batches) Ends(ctx context.Context, id string) (map[string]string, error) {
	m, err := s.Client().HGetAll(ctx, s.key(id, "m")).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: batch ends: %w", err)
	}
	return m, nil
}

// RequestCancel marks batch id's cancel as asked for (its members are
// cancelled by the caller).
func (s *Batches) RequestCancel(ctx context.Context, id string) error {
	if err := s.Client().HSet(ctx, s.key(id, "b"), "cq", "1").Err(); err != nil {
		return fmt.Errorf("queue: cancel batch: %w", err)
	}
	return nil
}

// MarkSent records that batch id's callback task is stored: it leaves the
// open set, and the batch's keys expire after retain.
func (s *Batches) MarkSent(ctx context.Context, id string, retain time.Duration) error {
	_, err := s.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.key(id, "b"), "cb", CallbackSent)
		for _, k := range []string{"b", "ids", "m"} {
			p.PExpire(ctx, s.key(id, k), retain)
		}
		p.ZRem(ctx, s.open(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: batch callback sent: %w", err)
	}
	return nil
}

// Expire lets a completed batch without callback expire after retain.
func (s *Batches) Expire(ctx context.Context, id string, retain time.Duration) error {
	_, err := s.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range []string{"b", "ids", "m"} {
			p.PExpire(ctx, s.key(id, k), retain)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: batch expire: %w", err)
	}
	return nil
}

// Open are the batches whose callback was not sent yet, oldest first (at
// most n).
func (s *Batches) Open(ctx context.Context, n int) ([]string, error) {
	ids, err := s.Client().ZRange(ctx, s.open(), 0, int64(n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: open batches: %w", err)
	}
	return ids, nil
}

// Forget drops id from the indexes (its keys expired).
func (s *Batches) Forget(ctx context.Context, id string) error {
	_, err := s.Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, s.idx(), id)
		p.ZRem(ctx, s.open(), id)
		return nil
	})
	return err
}

// List are the ids of this region's batches, newest first, created before
// before (ms; 0: now), at most n.
func (s *Batches) List(ctx context.Context, before int64, n int) ([]string, error) {
	max := "+inf"
	if before > 0 {
		max = "(" + strconv.FormatInt(before, 10)
	}
	ids, err := s.Client().ZRevRangeByScore(ctx, s.idx(), &redis.ZRangeBy{Max: max, Min: "-inf", Count: int64(n)}).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: list batches: %w", err)
	}
	return ids, nil
}

// Reported reads up to n member ends of shard not reported yet, oldest first.
func (s *Batches) Reported(ctx context.Context, shard, n int) ([]End, int, error) {
	raw, err := s.Client().LRange(ctx, s.EndsKey(shard), 0, int64(n-1)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("queue: batch ends: %w", err)
	}
	out := make([]End, 0, len(raw))
	for _, v := range raw {
		f := strings.Fields(v)
		if len(f) == 3 {
			out = append(out, End{Batch: f[0], Member: f[1], Code: f[2]})
		}
	}
	return out, len(raw), nil
}

// Trim drops the first n entries of shard's list of member ends (reported).
func (s *Batches) Trim(ctx context.Context, shard, n int) error {
	if err := s.Client().LTrim(ctx, s.EndsKey(shard), int64(n), -1).Err(); err != nil {
		return fmt.Errorf("queue: batch ends: %w", err)
	}
	return nil
}
