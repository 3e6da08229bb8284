package batch

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// countingSubmit is submitter(st) counting the members it stored, and
// held at gate (nil: not held) before each call.
func countingSubmit(sub SubmitFunc, n *atomic.Int64, gate chan struct{}) SubmitFunc {
	return func(ctx context.Context, specs []*task.Spec) ([]string, []error, error) {
		if gate != nil {
			<-gate
		}
		ids, errs, err := sub(ctx, specs)
		for _, id := range ids {
			if id != "" {
				n.Add(1)
			}
		}
		return ids, errs, err
	}
}

func apiCode(err error) (code, field string, retry int) {
	var ae *apiv1.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Field, ae.RetryAfterSeconds
	}
	return "", "", 0
}

// A batch's idempotency key: the same request answers the batch it
// created (no second batch, no second set of members), another request
// 409, a request while the first is still creating 503 with a Retry-After;
// a tenant's key never meets another tenant's.
func TestCreateWithIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	b, _, st := newBatches(t)
	var stored atomic.Int64
	sub := countingSubmit(submitter(st), &stored, nil)
	req := func(tenant string, types ...string) *Request {
		r := &Request{Name: "n", Tenant: tenant, IdempotencyKey: "k-1", OnComplete: &task.Spec{Type: "done"}}
		for _, ty := range types {
			r.Members = append(r.Members, &task.Spec{Type: ty, Tenant: tenant})
		}
		return r
	}
	first, _, err := b.Create(ctx, req("default", "a", "b"), sub)
	if err != nil || first.Duplicate || first.Counts.Total != 2 {
		t.Fatalf("first create: %+v %v", first, err)
	}
	again, _, err := b.Create(ctx, req("default", "a", "b"), sub)
	if err != nil || !again.Duplicate || again.ID != first.ID || again.Counts.Total != 2 {
		t.Fatalf("repeat: %+v %v, want batch %s, duplicate", again, err, first.ID)
	}
	if stored.Load() != 2 {
		t.Fatalf("%d members stored, want 2 (the repeat stores none)", stored.Load())
	}
	if _, _, err := b.Create(ctx, req("default", "a", "c"), sub); !fieldIs(err, apiv1.CodeConflict, "idempotency_key") {
		t.Fatalf("another request under the key: %v, want 409 idempotency_key", err)
	}
	other, _, err := b.Create(ctx, req("team-b", "a", "b"), sub)
	if err != nil || other.Duplicate || other.ID == first.ID || other.Tenant != "team-b" {
		t.Fatalf("team-b's key k-1: %+v %v, want a batch of its own", other, err)
	}
	ttl, err := st.Client().PTTL(ctx, b.store.Options().Prefix+":{bidem:default:k-1}").Result()
	if err != nil || ttl <= 23*time.Hour || ttl > task.DefaultDefaults().IdempotencyTTL {
		t.Fatalf("key kept %v (%v), want a task's idempotency TTL", ttl, err)
	}
	long := req("default", "a")
	long.IdempotencyKey = strings.Repeat("x", task.MaxIdemKeyLen+1)
	var fe *task.FieldError
	if _, _, err := b.Create(ctx, long, sub); !errors.As(err, &fe) || fe.Field != "idempotency_key" {
		t.Fatalf("a key too long: %v", err)
	}
}

func fieldIs(err error, code, field string) bool {
	c, f, _ := apiCode(err)
	return c == code && f == field
}

// A repeat while the first create is still storing its members answers 503
// with a Retry-After and creates nothing; once the first is done it
// answers its batch.
func TestCreateWithIdempotencyKeyInFlight(t *testing.T) {
	ctx := context.Background()
	b, _, st := newBatches(t)
	var stored atomic.Int64
	gate := make(chan struct{})
	req := func() *Request {
		return &Request{Tenant: "default", IdempotencyKey: "k", Members: []*task.Spec{{Type: "a"}}}
	}
	type res struct {
		st  *apiv1.BatchStatus
		err error
	}
	done := make(chan res, 1)
	go func() {
		s, _, err := b.Create(ctx, req(), countingSubmit(submitter(st), &stored, gate))
		done <- res{s, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := st.Client().Exists(ctx, b.store.Options().Prefix+":{bidem:default:k}").Result()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, _, err := b.Create(ctx, req(), countingSubmit(submitter(st), &stored, nil))
	if code, field, retry := apiCode(err); code != apiv1.CodeUnavailable || field != "idempotency_key" || retry <= 0 {
		t.Fatalf("repeat in flight: %v (code %s field %s retry %d), want 503 with a Retry-After", err, code, field, retry)
	}
	close(gate)
	first := <-done
	if first.err != nil {
		t.Fatal(first.err)
	}
	again, _, err := b.Create(ctx, req(), countingSubmit(submitter(st), &stored, nil))
	if err != nil || !again.Duplicate || again.ID != first.st.ID || stored.Load() != 1 {
		t.Fatalf("repeat after: %+v %v, %d stored; want batch %s, one member", again, err, stored.Load(), first.st.ID)
	}
}

// A create that stored nothing (every member refused) frees its key: the
// next request under it is a create of its own.
func TestIdempotencyKeyFreedWhenNothingStored(t *testing.T) {
	ctx := context.Background()
	b, _, st := newBatches(t)
	refuse := func(_ context.Context, specs []*task.Spec) ([]string, []error, error) {
		errs := make([]error, len(specs))
		for i := range errs {
			errs[i] = &task.FieldError{Field: "type", Msg: "refused"}
		}
		return make([]string, len(specs)), errs, nil
	}
	r := &Request{Tenant: "default", IdempotencyKey: "k", Members: []*task.Spec{{Type: "a"}}}
	if _, _, err := b.Create(ctx, r, refuse); err == nil {
		t.Fatal("every member refused, yet created")
	}
	r2 := &Request{Tenant: "default", IdempotencyKey: "k", Members: []*task.Spec{{Type: "b"}}}
	got, _, err := b.Create(ctx, r2, submitter(st))
	if err != nil || got.Duplicate || got.Counts.Total != 1 {
		t.Fatalf("after a refused create: %+v %v, want a new batch", got, err)
	}
}
