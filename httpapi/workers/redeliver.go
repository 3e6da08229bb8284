package workers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// A claim's answer can be lost after the store leased its tasks: the
// server dies, or the connection breaks, between the store's claim and the
// worker reading the answer. Those tasks would sit RUNNING until their
// leases ran out and then spend an attempt. So a claim may name itself
// (claim_id), and the session remembers the last named claim: a retry of it
// (same id, on any server of the region) answers what the first try took.
//
// The record is written before each store claim (taking, since when) and
// replaced by the ids answered together with the held tasks, so a server
// dying anywhere in between leaves either the ids, or "taking": then the
// retry finds the claim's tasks among the pool's RUNNING ones leased to the
// worker that its session does not hold (proxy.Proxy.Again).

// claimRecord is what a session remembers of its last named claim.
type claimRecord struct {
	ID     string
	Taking bool      // a store claim of it was sent, its answer not recorded
	Since  time.Time // when that store claim was sent
	Tasks  []string  // not Taking: the ids the claim answered
}

// Fields of a claim record in the registration hash.
const (
	claimIDField    = "ci"
	claimStateField = "cs" // "w:<ms>" taking since, or "d:<id>,<id>…" answered
)

func parseClaim(id, state string) claimRecord {
	r := claimRecord{ID: id}
	switch {
	case strings.HasPrefix(state, "w:"):
		ms, _ := strconv.ParseInt(state[2:], 10, 64)
		r.Taking, r.Since = true, time.UnixMilli(ms)
	case strings.HasPrefix(state, "d:") && len(state) > 2:
		r.Tasks = strings.Split(state[2:], ",")
	}
	return r
}

// intend records that a store claim for claim cid of worker id is about
// to be sent.
func (s *sessions) intend(ctx context.Context, id, cid string) error {
	err := s.rdb.HSet(ctx, regKey(id), claimIDField, cid, claimStateField, "w:"+strconv.FormatInt(time.Now().UnixMilli(), 10)).Err()
	if err != nil {
		return fmt.Errorf("workers: record the claim: %w", err)
	}
	return nil
}

// answered records ts as worker id's held tasks and, with cid not "", as
// claim cid's answer, in one transaction.
func (s *sessions) answered(ctx context.Context, id, cid string, ts []*task.Task) error {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(ts) > 0 {
			kv := make([]any, 0, 2*len(ts))
			for _, t := range ts {
				kv = append(kv, t.ID, heldValue(t.LeaseToken, now, t.SlotMilli()))
			}
			p.HSet(ctx, heldKey(id), kv...)
			p.PExpire(ctx, heldKey(id), s.ttl())
		}
		if cid != "" {
			p.HSet(ctx, regKey(id), claimIDField, cid, claimStateField, "d:"+strings.Join(ids, ","))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("workers: record the claimed tasks: %w", err)
	}
	return nil
}

// again answers a retry of se's last named claim: the tasks it took that
// the worker still may run, under the leases they were handed out with,
// recorded as that claim's answer. None: the first try took nothing still
// running, and the retry claims afresh.
func (h *Handlers) again(ctx context.Context, se session, hs map[string]held) ([]*task.Task, error) {
	var ids []string
	if !se.Claim.Taking {
		ids = append([]string{}, se.Claim.Tasks...)
	}
	holds := func(id string) bool { _, ok := hs[id]; return ok }
	ts, err := h.cfg.Claimer.Again(ctx, se.worker(), ids, se.Claim.Since, holds)
	if err != nil {
		return nil, err
	}
	out := ts[:0]
	for _, t := range ts {
		if hd, ok := hs[t.ID]; !ok || hd.Lease == t.LeaseToken {
			out = append(out, t)
		}
	}
	if err := h.sessions.answered(ctx, se.ID, se.Claim.ID, out); err != nil {
		return nil, err
	}
	return out, nil
}
