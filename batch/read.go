package batch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue/batchstore"
	"github.com/ax-sched/ax/task"
)

// Status reads batch id wherever its home is; a batch of another tenant
// than tenant ("": any) is ErrNotFound.
func (b *Batches) Status(ctx context.Context, id, tenant string) (*apiv1.BatchStatus, error) {
	home, err := homeOf(id)
	if err != nil {
		return nil, err
	}
	var st *apiv1.BatchStatus
	if home == b.cfg.Region {
		st, err = b.statusHere(ctx, id, true)
	} else {
		st = new(apiv1.BatchStatus)
		err = b.tasks.Proxy(ctx, home, http.MethodGet, "/v1/batches/"+url.PathEscape(id), nil, st)
	}
	if err != nil {
		return nil, apiErr(err)
	}
	if tenant != "" && st.Tenant != tenant {
		return nil, ErrNotFound
	}
	return st, nil
}

// statusHere reads batch id of this region; withIDs lists its failed and
// canceled members.
func (b *Batches) statusHere(ctx context.Context, id string, withIDs bool) (*apiv1.BatchStatus, error) {
	bt, err := b.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	st := statusOf(bt, b.cfg.Region)
	if withIDs && bt.Failed+bt.Canceled > 0 {
		ends, err := b.store.Ends(ctx, id)
		if err != nil {
			return nil, err
		}
		st.Failed, st.Canceled, _ = endedIDs(ends, apiv1.MaxBatchIDs)
	}
	return st, nil
}

// statusOf is bt as the API shows it.
func statusOf(bt *batchstore.Batch, region string) *apiv1.BatchStatus {
	done := bt.Succeeded + bt.Failed + bt.Canceled
	st := &apiv1.BatchStatus{ID: bt.ID, Name: bt.Name, Tenant: bt.Tenant, Region: region, State: bt.State,
		Counts: apiv1.BatchCounts{Total: bt.Members, Succeeded: bt.Succeeded, Failed: bt.Failed, Canceled: bt.Canceled,
			Unfinished: max(bt.Members-done, 0)},
		CancelRequested: bt.CancelRequested, CreatedAt: bt.CreatedAt, CompletedAt: bt.CompletedAt}
	switch bt.Callback {
	case batchstore.CallbackNone:
		st.Callback = apiv1.BatchCallbackNone
	case batchstore.CallbackDue:
		st.Callback = apiv1.BatchCallbackDue
	case batchstore.CallbackSent:
		st.Callback = apiv1.BatchCallbackSent
	default:
		st.Callback = apiv1.BatchCallbackWaiting
	}
	cbs := decodeCallbacks(bt.Callbacks)
	if cbs.OnComplete != nil {
		st.OnCompleteID = callbackID(bt.ID, onComplete)
	}
	if cbs.OnSuccess != nil && (bt.State != batchstore.StateCompleted || bt.Failed+bt.Canceled == 0) {
		st.OnSuccessID = callbackID(bt.ID, onSuccess)
	}
	return st
}

// endedIDs are the failed and canceled members of ends, sorted, at most
// limit each, and how many were left out.
func endedIDs(ends map[string]string, limit int) (failed, canceled []string, omitted int) {
	failed, canceled = []string{}, []string{}
	for id, c := range ends {
		switch c {
		case "F":
			failed = append(failed, id)
		case "C":
			canceled = append(canceled, id)
		}
	}
	sort.Strings(failed)
	sort.Strings(canceled)
	if len(failed) > limit {
		omitted += len(failed) - limit
		failed = failed[:limit]
	}
	if len(canceled) > limit {
		omitted += len(canceled) - limit
		canceled = canceled[:limit]
	}
	return failed, canceled, omitted
}

// List reads this region's batches of tenant ("": every tenant's), newest
// first, at most limit, from the cursor after ("": the newest); next is
// the cursor of the page after ("" at the end).
func (b *Batches) List(ctx context.Context, tenant string, limit int, after string) ([]apiv1.BatchStatus, string, error) {
	before := int64(0)
	if after != "" {
		v, err := strconv.ParseInt(after, 10, 64)
		if err != nil || v <= 0 {
			return nil, "", &task.FieldError{Field: "after", Msg: "is not a cursor of GET /v1/batches"}
		}
		before = v
	}
	out := []apiv1.BatchStatus{}
	for len(out) < limit {
		ids, err := b.store.List(ctx, before, 200)
		if err != nil {
			return nil, "", err
		}
		for _, id := range ids {
			bt, err := b.store.Get(ctx, id)
			if errors.Is(err, batchstore.ErrNotFound) {
				_ = b.store.Forget(ctx, id) // expired
				continue
			}
			if err != nil {
				return nil, "", err
			}
			before = bt.CreatedAt.UnixMilli()
			if tenant != "" && bt.Tenant != tenant {
				continue
			}
			out = append(out, *statusOf(bt, b.cfg.Region))
			if len(out) == limit {
				return out, strconv.FormatInt(before, 10), nil
			}
		}
		if len(ids) < 200 {
			break
		}
	}
	return out, "", nil
}

// Cancel cancels batch id of tenant ("": any) wherever its home is: every
// member not ended yet is asked to stop, as by; the callbacks run once the
// members have ended, as ever.
func (b *Batches) Cancel(ctx context.Context, id, tenant, by string) (*apiv1.BatchStatus, error) {
	home, err := homeOf(id)
	if err != nil {
		return nil, err
	}
	if home != b.cfg.Region {
		if _, err := b.Status(ctx, id, tenant); err != nil {
			return nil, err
		}
		st := new(apiv1.BatchStatus)
		err = b.tasks.Proxy(ctx, home, http.MethodPost, "/v1/batches/"+url.PathEscape(id)+"/cancel", nil, st)
		return st, err
	}
	bt, err := b.store.Get(ctx, id)
	if err != nil {
		return nil, apiErr(err)
	}
	if tenant != "" && bt.Tenant != tenant {
		return nil, ErrNotFound
	}
	if err := b.store.RequestCancel(ctx, id); err != nil {
		return nil, err
	}
	ends, err := b.store.Ends(ctx, id)
	if err != nil {
		return nil, err
	}
	ids, err := b.store.MemberIDs(ctx, id, 0, 0)
	if err != nil {
		return nil, err
	}
	if err := b.cancelMembers(ctx, ids, ends, by); err != nil {
		return nil, err
	}
	return b.statusHere(ctx, id, true)
}

// cancelWorkers bounds the cancels a batch's cancel has in flight.
const cancelWorkers = 16

// cancelMembers asks every member of ids not in ends to stop; the first
// error is returned after all were asked.
func (b *Batches) cancelMembers(ctx context.Context, ids []string, ends map[string]string, by string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan string)
	for range cancelWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := b.tasks.CancelTask(ctx, id, by); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		if _, ended := ends[id]; !ended {
			work <- id
		}
	}
	close(work)
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
