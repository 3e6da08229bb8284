package handoff

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// The commit of hand-offs (docs/architecture.md, hand-off). A receiver
// holds every hand-off it accepts PENDING and unclaimable until the sending
// region's word: that region's record of the task is the one decision. The
// sender records "handed off to R" only from "in the outbox for R", and
// places a task elsewhere only from there too, so once it has done either
// the other can never happen; the receiver runs the task only after the
// sender says "committed" and drops its copy when the sender says
// "revoked". Hence a sender may give up on a target that stays unreachable
// (Config.HandOffHorizon) without any risk of the task running twice.

// Held hand-offs are asked about once they are heldAsk old (the sender's
// commit normally arrives well before), every heldEvery.
const (
	heldAsk   = time.Second
	heldEvery = time.Second
)

// Commit releases hand-offs held from region from: that region recorded
// them as handed here. It returns how many it released.
func (n *Receiver) Commit(ctx context.Context, from string, ids []string) (int, error) {
	if err := n.otherRegion("from", from); err != nil {
		return 0, err
	}
	if len(ids) > apiv1.MaxBatch {
		return 0, &task.FieldError{Field: "ids", Msg: fmt.Sprintf("at most %d ids", apiv1.MaxBatch)}
	}
	k, err := n.store.HandOffs().Release(ctx, from, ids)
	if k > 0 {
		n.wake() // delayed ones may be due before the promoter's next look
	}
	return k, err
}

// HandOffWord is this region's word, as the sender, on hand-offs that
// region target holds (HandOffStatus).
func (n *Receiver) HandOffWord(ctx context.Context, target string, ids []string) ([]apiv1.HandOffStatusItem, error) {
	if err := n.otherRegion("region", target); err != nil {
		return nil, err
	}
	if len(ids) > apiv1.MaxBatch {
		return nil, &task.FieldError{Field: "ids", Msg: fmt.Sprintf("at most %d ids", apiv1.MaxBatch)}
	}
	words, err := n.store.HandOffs().HandOffWord(ctx, target, ids)
	if err != nil {
		return nil, err
	}
	out := make([]apiv1.HandOffStatusItem, len(ids))
	for i, id := range ids {
		out[i] = apiv1.HandOffStatusItem{ID: id, Status: words[i]}
	}
	return out, nil
}

func (n *Receiver) otherRegion(field, name string) error {
	if name == n.cfg.Region || !slices.Contains(n.cfg.Regions, name) {
		return &task.FieldError{Field: field, Msg: "not another region of the federation: " + name}
	}
	return nil
}

// HeldLoop asks the senders of hand-offs held here longer than heldAsk for
// their word, and releases or drops them by it (a region leader loop): the
// path for hand-offs whose commit was lost (the sender stopped, or the
// network dropped it) and for ones the sender revoked while this region
// was away.
// It sets ax_handoffs_held_oldest_age_seconds on each look, and removes
// the series when it stops (another server leads).
func (n *Receiver) HeldLoop(ctx context.Context, _ queue.Fence, _ func(error)) {
	age := n.metrics.HeldAge.WithLabelValues(n.cfg.Region)
	defer n.metrics.HeldAge.DeleteLabelValues(n.cfg.Region)
	every(ctx, heldEvery, func() bool {
		now := n.cfg.Now()
		held, err := n.store.HandOffs().Held(ctx, now.Add(-heldAsk), apiv1.MaxBatch)
		if err != nil {
			n.log.Warn("held hand-offs: read failed", "err", err)
			return true
		}
		byFrom := map[string][]queue.HeldTask{}
		oldest := now
		for _, h := range held {
			byFrom[h.From] = append(byFrom[h.From], h)
			if h.At.Before(oldest) {
				oldest = h.At
			}
		}
		age.Set(now.Sub(oldest).Seconds())
		for from, hs := range byFrom {
			n.askWord(ctx, from, hs, now)
		}
		return true
	})
}

// askWord asks region from about hand-offs held from it and settles the
// ones it has decided.
func (n *Receiver) askWord(ctx context.Context, from string, hs []queue.HeldTask, now time.Time) {
	r, ok := n.view.Region(from)
	if !ok || r.API == "" {
		return // asked again once it is back in the view
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.ID
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var resp apiv1.HandOffStatusResponse
	if _, err := n.peer.Call(cctx, r.API, http.MethodPost, "/v1/internal/handoff/status",
		apiv1.HandOffStatus{Region: n.cfg.Region, IDs: ids}, &resp); err != nil {
		n.log.Debug("held hand-offs: the sender did not answer", "peer", from, "n", len(ids), "err", err)
		return
	}
	var release, drop []string
	for i, it := range resp.Results {
		if i >= len(hs) || it.ID != hs[i].ID {
			break
		}
		switch it.Status {
		case apiv1.HandOffCommitted:
			release = append(release, it.ID)
		case apiv1.HandOffRevoked:
			drop = append(drop, it.ID)
		case apiv1.HandOffUnknown:
			// The sender lost the task (its record cannot have expired
			// yet): it can place it nowhere else, so it runs here.
			release = append(release, it.ID)
			n.log.Warn("held hand-off unknown to its sender (it lost its record); running it here", "peer", from, "id", it.ID)
		}
	}
	if len(release) > 0 {
		if k, err := n.store.HandOffs().Release(ctx, from, release); err != nil {
			n.log.Warn("held hand-offs: release failed", "peer", from, "err", err)
		} else if k > 0 {
			n.wake()
			n.log.Info("held hand-offs released on the sender's word", "peer", from, "n", k, idsAttr(release))
		}
	}
	if len(drop) > 0 {
		if k, err := n.store.HandOffs().Drop(ctx, from, drop); err != nil {
			n.log.Warn("held hand-offs: drop failed", "peer", from, "err", err)
		} else if k > 0 {
			n.metrics.Handoffs.WithLabelValues(n.cfg.Region, from, "dropped").Add(float64(k))
			n.log.Warn("held hand-offs dropped unrun: the sender placed them elsewhere", "peer", from, "n", k,
				idsAttr(drop), "reason", task.ReasonHandOffRevoked)
		}
	}
}
