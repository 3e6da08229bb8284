package batch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/batchstore"
	"github.com/ax-sched/ax/task"
)

// The callbacks' names: fields of the create and of BatchOutcome.Callback.
const (
	onComplete = "on_complete"
	onSuccess  = "on_success"
)

// callbackID is the task id of batch id's callback name: derived, so
// storing it again stores nothing (the store accepts an id once).
func callbackID(id, name string) string {
	cid, err := queue.DAGTaskID(id, name, 0)
	if err != nil {
		return ""
	}
	return cid
}

// decodeCallbacks reads a batch's stored callbacks (none on a fault).
func decodeCallbacks(raw json.RawMessage) callbacks {
	var c callbacks
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &c) // written by Create
	}
	return c
}

// sendCallbacks stores the callback tasks of completed batch id (those its
// outcome calls for) and marks them sent; a failure leaves them due for
// Recover. Storing them again is harmless: their ids are fixed.
func (b *Batches) sendCallbacks(ctx context.Context, id string) {
	if err := b.sendCallbacksErr(ctx, id); err != nil && ctx.Err() == nil {
		b.log.Warn("batch callback not stored yet; the region leader tries again", "batch", id, "err", err)
	}
}

func (b *Batches) sendCallbacksErr(ctx context.Context, id string) error {
	bt, err := b.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if bt.State != batchstore.StateCompleted || bt.Callback != batchstore.CallbackDue {
		return nil
	}
	ends, err := b.store.Ends(ctx, id)
	if err != nil {
		return err
	}
	failed, canceled, omitted := endedIDs(ends, apiv1.MaxBatchIDs)
	st := statusOf(bt, b.cfg.Region)
	cbs := decodeCallbacks(bt.Callbacks)
	for _, c := range []struct {
		name string
		sp   *task.Spec
	}{{onComplete, cbs.OnComplete}, {onSuccess, cbs.OnSuccess}} {
		if c.sp == nil || c.name == onSuccess && bt.Failed+bt.Canceled > 0 {
			continue
		}
		out := apiv1.BatchOutcome{BatchID: id, Name: bt.Name, Callback: c.name, Counts: st.Counts,
			Failed: failed, Canceled: canceled, Omitted: omitted, Payload: c.sp.Payload}
		sp := *c.sp
		if sp.Payload, err = json.Marshal(out); err != nil {
			return err
		}
		_, refused, err := b.tasks.Enqueue(ctx, b.cfg.Region, callbackID(id, c.name), &sp)
		if err != nil {
			return err
		}
		if refused != nil {
			// Sending it again cannot change the refusal (the spec was
			// valid at create: a budget or backlog refused it since).
			b.log.Warn("batch callback refused", "batch", id, "callback", c.name, "err", refused)
		}
	}
	return b.store.MarkSent(ctx, id, b.cfg.Retain)
}

// recoverBatch is how many open batches one pass of Recover reads.
const recoverBatch = 200

// Recover stores the callbacks still due of this region's completed
// batches (a server that completed one stopped before storing them) and
// lets completed batches without callbacks expire.
func (b *Batches) Recover(ctx context.Context) error {
	ids, err := b.store.Open(ctx, recoverBatch)
	if err != nil {
		return err
	}
	for _, id := range ids {
		bt, err := b.store.Get(ctx, id)
		if errors.Is(err, batchstore.ErrNotFound) {
			_ = b.store.Forget(ctx, id)
			continue
		}
		if err != nil {
			return err
		}
		if bt.State == batchstore.StateCompleted && bt.Callback == batchstore.CallbackDue {
			if err := b.sendCallbacksErr(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}
