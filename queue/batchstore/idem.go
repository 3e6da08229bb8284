package batchstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
)

var idemScript = queue.Load("batch_idem")

// Key is what a batch idempotency key holds: the hash of the request that
// took it and the batch it created (Pending: its create is still under way).
type Key struct {
	Pending  bool
	Hash, ID string
}

// idemKey is tenant's batch idempotency key key:
//
//	ax:{bidem:<tenant>:<key>}  STRING  "<p|d> <hash> <batch id>"
//
// (a tenant name holds no ':', so no two tenants' keys meet).
func (s *Batches) idemKey(tenant, key string) string {
	return s.Options().Prefix + ":{bidem:" + tenant + ":" + key + "}"
}

func (s *Batches) idem(ctx context.Context, op, tenant, key, hash, id string, d time.Duration) (*Key, error) {
	v, err := s.Run(ctx, s.Client(), idemScript, []string{s.idemKey(tenant, key)}, op, hash, id, d.Milliseconds()).Text()
	if err != nil {
		return nil, fmt.Errorf("queue: batch idempotency key: %w", err)
	}
	f := strings.Fields(v)
	if len(f) != 3 {
		return nil, nil
	}
	return &Key{Pending: f[0] == "p", Hash: f[1], ID: f[2]}, nil
}

// ClaimKey takes tenant's idempotency key for the create of batch id
// (request hash) for lease: nil when it took it; else what the key holds,
// unchanged.
func (s *Batches) ClaimKey(ctx context.Context, tenant, key, hash, id string, lease time.Duration) (*Key, error) {
	return s.idem(ctx, "claim", tenant, key, hash, id, lease)
}

// TouchKey extends the lease of a key ClaimKey took for id.
func (s *Batches) TouchKey(ctx context.Context, tenant, key, hash, id string, lease time.Duration) error {
	_, err := s.idem(ctx, "touch", tenant, key, hash, id, lease)
	return err
}

// SettleKey records that id's create stored its batch: the key answers
// with id for ttl.
func (s *Batches) SettleKey(ctx context.Context, tenant, key, hash, id string, ttl time.Duration) error {
	_, err := s.idem(ctx, "settle", tenant, key, hash, id, ttl)
	return err
}

// ReleaseKey frees a key ClaimKey took for id whose create stored nothing.
func (s *Batches) ReleaseKey(ctx context.Context, tenant, key, hash, id string) error {
	_, err := s.idem(ctx, "release", tenant, key, hash, id, 0)
	return err
}
