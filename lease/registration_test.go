package lease

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ax-sched/ax/internal/testenv"
)

func TestRegistrationFollowsSession(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)
	m := NewManager(e.Client(), testOptions()...)
	t.Cleanup(func() { _ = m.Close(context.Background()) })

	const key = "/ax/regions/eu-west"
	get := func() (value string, lease clientv3.LeaseID, ok bool) {
		resp, err := admin.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return "", 0, false
		}
		return string(resp.Kvs[0].Value), clientv3.LeaseID(resp.Kvs[0].Lease), true
	}

	r, err := Register(ctx, m, key, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	s1, _ := m.Current()
	if v, l, ok := get(); !ok || v != "v1" || l != s1.Lease() {
		t.Fatalf("after Register: %q lease %x ok %v; want v1 under %x", v, l, ok, s1.Lease())
	}

	// The session's lease is lost: the key goes with it, then comes back
	// under the replacement session.
	if _, err := admin.Revoke(ctx, s1.Lease()); err != nil {
		t.Fatal(err)
	}
	if _, l, ok := get(); ok && l == s1.Lease() {
		t.Fatal("key outlived its lease")
	}
	eventually(t, 2*testTTL, "key re-put under a new lease", func() bool {
		v, l, ok := get()
		return ok && v == "v1" && l != s1.Lease()
	})
	s2, _ := m.Current()
	if _, l, _ := get(); s2 == nil || l != s2.Lease() {
		t.Fatalf("key under lease %x, current session %v", l, s2)
	}

	if err := r.Update(ctx, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := get(); v != "v2" {
		t.Fatalf("after Update: %q", v)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := get(); ok {
		t.Fatal("key left after Close")
	}
	if s, _ := m.Current(); s == nil || s.Err() != nil {
		t.Fatal("closing a registration must not touch the session")
	}
}

// A value updated while etcd is unreachable is written once it is back.
func TestRegistrationUpdateDuringOutage(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	p := testenv.StartProxy(t, e.Endpoint())
	ctx := testCtx(t)
	m := NewManager(newClient(t, p.URL()), testOptions()...)
	t.Cleanup(func() { _ = m.Close(context.Background()) })

	const key = "/ax/workers/w1"
	r, err := Register(ctx, m, key, []byte("idle"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	p.Down()
	uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := r.Update(uctx, []byte("busy")); err == nil {
		t.Fatal("Update succeeded with etcd unreachable")
	}
	cancel()
	p.Up()
	eventually(t, 3*testTTL, "pending value written after the outage", func() bool {
		resp, err := admin.Get(ctx, key)
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "busy"
	})
}
