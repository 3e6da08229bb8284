package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue/batchstore"
)

// idemLease is how long a create holds its idempotency key before it
// stored its batch; the create renews it with every part of members it
// submits, so only a create whose server died lets it lapse (a repeat
// then creates the batch anew).
const idemLease = time.Minute

// idemRetryAfter is the Retry-After of a repeat whose first create is
// still under way: a create takes about a second a part of members.
const idemRetryAfter = 2

// heldKey is an idempotency key a create holds; nil: a create without one.
type heldKey struct {
	b                *Batches
	tenant, key, sum string
	id               string
}

// claim takes req's idempotency key for the create of batch id: k the key
// taken (nil: req has none); else held is the batch a create with the
// key stored (Duplicate) or err why the key does not answer this request.
func (b *Batches) claim(ctx context.Context, req *Request, id string) (k *heldKey, held *apiv1.BatchStatus, err error) {
	if req.IdempotencyKey == "" {
		return nil, nil, nil
	}
	sum, err := requestHash(req)
	if err != nil {
		return nil, nil, err
	}
	got, err := b.store.ClaimKey(ctx, req.Tenant, req.IdempotencyKey, sum, id, idemLease)
	switch {
	case err != nil:
		return nil, nil, err
	case got == nil:
		return &heldKey{b: b, tenant: req.Tenant, key: req.IdempotencyKey, sum: sum, id: id}, nil, nil
	case got.Hash != sum:
		return nil, nil, &apiv1.Error{Code: apiv1.CodeConflict, Field: "idempotency_key",
			Message: "idempotency key already used with a different batch (" + got.ID + ")"}
	case got.Pending:
		return nil, nil, &apiv1.Error{Code: apiv1.CodeUnavailable, Field: "idempotency_key", RetryAfterSeconds: idemRetryAfter,
			Message: "a request with this idempotency key is still creating batch " + got.ID + "; retry"}
	}
	st, err := b.statusHere(ctx, got.ID, true)
	if errors.Is(err, batchstore.ErrNotFound) {
		return nil, nil, &apiv1.Error{Code: apiv1.CodeNotFound, Field: "idempotency_key",
			Message: "the batch this idempotency key created (" + got.ID + ") is no longer kept"}
	}
	if err != nil {
		return nil, nil, err
	}
	st.Duplicate = true
	return nil, st, nil
}

// requestHash is what makes two creates the same request: the batch's
// name, tenant, members and callbacks as decoded (not their bytes).
func requestHash(req *Request) (string, error) {
	c := *req
	c.IdempotencyKey = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16]), nil
}

func (k *heldKey) touch(ctx context.Context) {
	if k == nil {
		return
	}
	if err := k.b.store.TouchKey(ctx, k.tenant, k.key, k.sum, k.id, idemLease); err != nil {
		k.b.log.Warn("batch idempotency key: lease not renewed", "batch", k.id, "err", err)
	}
}

func (k *heldKey) settle(ctx context.Context) {
	if k == nil {
		return
	}
	ttl := k.b.cfg.Defaults.IdempotencyTTL
	if err := k.b.store.SettleKey(context.WithoutCancel(ctx), k.tenant, k.key, k.sum, k.id, ttl); err != nil {
		k.b.log.Warn("batch idempotency key: not recorded, it lapses with its lease", "batch", k.id, "err", err)
	}
}

func (k *heldKey) release(ctx context.Context) {
	if k == nil {
		return
	}
	if err := k.b.store.ReleaseKey(context.WithoutCancel(ctx), k.tenant, k.key, k.sum, k.id); err != nil {
		k.b.log.Warn("batch idempotency key: not freed, it lapses with its lease", "batch", k.id, "err", err)
	}
}
