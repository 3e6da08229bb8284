package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Request is a batch to create: specs decoded, their tenant settled (the
// caller's checks of trust done).
type Request struct {
	Name       string
	Tenant     string
	Members    []*task.Spec
	OnComplete *task.Spec
	OnSuccess  *task.Spec
	// IdempotencyKey ("": none) makes a repeat of the request create
	// nothing: the key's first create answers every later one
	// (Batches.Create).
	IdempotencyKey string
}

// MaxNameLen bounds a batch's name.
const MaxNameLen = 128

// callbacks are a batch's callback specs as stored.
type callbacks struct {
	OnComplete *task.Spec `json:"on_complete,omitempty"`
	OnSuccess  *task.Spec `json:"on_success,omitempty"`
}

// Validate checks req whole before anything is stored: 1 to
// apiv1.MaxBatchMembers members, each a valid spec without keys, and
// valid callbacks. Errors are *task.FieldError naming tasks[i].<field>,
// on_complete.<field> or on_success.<field>.
func (b *Batches) Validate(req *Request) error {
	if n := len(req.Members); n == 0 || n > apiv1.MaxBatchMembers {
		return &task.FieldError{Field: "tasks", Msg: fmt.Sprintf("a batch holds 1 to %d tasks (%d given)", apiv1.MaxBatchMembers, n)}
	}
	if len(req.Name) > MaxNameLen {
		return &task.FieldError{Field: "name", Msg: fmt.Sprintf("longer than %d characters", MaxNameLen)}
	}
	if len(req.IdempotencyKey) > task.MaxIdemKeyLen {
		return &task.FieldError{Field: "idempotency_key", Msg: fmt.Sprintf("longer than %d characters", task.MaxIdemKeyLen)}
	}
	for i, sp := range req.Members {
		if err := b.check(sp); err != nil {
			return under(err, fmt.Sprintf("tasks[%d]", i))
		}
	}
	for _, c := range []struct {
		field string
		sp    *task.Spec
	}{{"on_complete", req.OnComplete}, {"on_success", req.OnSuccess}} {
		if c.sp == nil {
			continue
		}
		if err := b.check(c.sp); err != nil {
			return under(err, c.field)
		}
	}
	return nil
}

// check validates one spec of a batch (a copy: the pipeline normalizes
// the members again).
func (b *Batches) check(sp *task.Spec) error {
	c := *sp
	if err := c.Normalize(b.cfg.Defaults, b.cfg.Now()); err != nil {
		return err
	}
	switch {
	case sp.IdempotencyKey != "":
		return &task.FieldError{Field: "idempotency_key", Msg: "a batch's tasks take no idempotency key"}
	case sp.UniqueKey != "":
		return &task.FieldError{Field: "unique_key", Msg: "a batch's tasks take no unique key"}
	case sp.DebounceKey != "":
		return &task.FieldError{Field: "debounce_key", Msg: "a batch's tasks take no debounce key"}
	}
	for j, r := range c.Regions {
		if b.cfg.Regions != nil && !slices.Contains(b.cfg.Regions, r) {
			return &task.FieldError{Field: fmt.Sprintf("regions[%d]", j), Msg: fmt.Sprintf("no region %q in this federation", r)}
		}
	}
	return nil
}

// under names err's field under prefix (a *task.FieldError; others as they are).
func under(err error, prefix string) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under(prefix)
	}
	return err
}

// Create validates req, stores the batch in this region, then submits its
// members through submit in parts of apiv1.MaxBatch, recording those
// accepted; a member the pipeline refuses is not part of the batch (the
// answer's Rejected). When every member is refused, nothing is kept and
// the first refusal is the error; a submit call's own error (a quota, an
// outage) before any member was accepted is the error too, after it the
// members accepted so far are the batch.
//
// With an idempotency key, the key of req's tenant in this region decides
// (keep every key of a tenant in one region: the API sends a create to its
// key's home): a key a create stored its batch under answers that batch
// (Duplicate, created nothing) while the request is the same, and a 409
// naming idempotency_key when it is not; a key whose create is still under
// way answers 503 with a Retry-After; a create that stored nothing frees
// its key. A key is kept as long as a task's (Defaults.IdempotencyTTL).
//
// rejected are the refused members' errors by their index in tasks.
func (b *Batches) Create(ctx context.Context, req *Request, submit SubmitFunc) (st *apiv1.BatchStatus, rejected map[int]error, err error) {
	if err := b.Validate(req); err != nil {
		return nil, nil, err
	}
	var cbs []byte
	if req.OnComplete != nil || req.OnSuccess != nil {
		if cbs, err = json.Marshal(callbacks{OnComplete: req.OnComplete, OnSuccess: req.OnSuccess}); err != nil {
			return nil, nil, err
		}
	}
	id := b.store.NewID(0, b.cfg.Now())
	k, held, err := b.claim(ctx, req, id)
	if err != nil || held != nil {
		return held, nil, err
	}
	if err := b.store.Create(ctx, id, req.Tenant, req.Name, cbs); err != nil {
		k.release(ctx)
		return nil, nil, err
	}
	rejected, first, accepted, err := b.submitMembers(ctx, id, req.Members, submit, k.touch)
	if err == nil && accepted == 0 {
		err = under(rejected[first], fmt.Sprintf("tasks[%d]", first))
	}
	if accepted == 0 {
		// Nothing of the batch was stored but its record.
		if derr := b.store.Delete(context.WithoutCancel(ctx), id); derr != nil {
			b.log.Warn("batch refused, its record left to expire", "batch", id, "err", derr)
		}
		k.release(ctx)
		return nil, nil, err
	}
	k.settle(ctx)
	if err != nil {
		b.log.Warn("batch created with part of its tasks: a submit call failed", "batch", id, "accepted", accepted, "err", err)
	}
	ap, aerr := b.store.Apply(ctx, id, nil, true)
	if aerr != nil {
		return nil, nil, aerr
	}
	b.completed(ctx, id, ap)
	st, err = b.statusHere(ctx, id, false)
	if err != nil {
		return nil, nil, err
	}
	return st, rejected, nil
}

// submitMembers submits members in parts, recording each part's accepted
// ids before the next; first is the index of the first refused. It stops
// at a call's error (returned; the members left are refused with it).
func (b *Batches) submitMembers(ctx context.Context, id string, members []*task.Spec, submit SubmitFunc,
	touch func(context.Context)) (rejected map[int]error, first, accepted int, err error) {
	rejected, first = map[int]error{}, -1
	refuse := func(i int, err error) {
		rejected[i] = err
		if first < 0 {
			first = i
		}
	}
	for start := 0; start < len(members); start += apiv1.MaxBatch {
		if start > 0 {
			touch(ctx)
		}
		part := members[start:min(start+apiv1.MaxBatch, len(members))]
		for _, sp := range part {
			sp.Batch = id
		}
		got, refused, err := submit(ctx, part)
		if err != nil {
			for i := start; i < len(members); i++ {
				refuse(i, err)
			}
			return rejected, first, accepted, err
		}
		ids := make([]string, 0, len(got))
		for k, gid := range got {
			if gid == "" {
				refuse(start+k, refused[k])
				continue
			}
			ids = append(ids, gid)
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := b.store.Add(ctx, id, ids); err != nil {
			return rejected, first, accepted, err
		}
		accepted += len(ids)
	}
	return rejected, first, accepted, nil
}
