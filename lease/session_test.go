package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ax-sched/ax/internal/testenv"
)

func TestSessionEnds(t *testing.T) {
	testenv.Slow(t)
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)

	tests := []struct {
		name    string
		end     func(t *testing.T, s *Session)
		wantErr error
		within  time.Duration
	}{
		{
			name: "revoked elsewhere (as if expired)",
			end: func(t *testing.T, s *Session) {
				if _, err := admin.Revoke(ctx, s.Lease()); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: ErrLeaseExpired,
			within:  testTTL, // noticed at the next renewal, every TTL/3
		},
		{
			name: "closed by its owner",
			end: func(t *testing.T, s *Session) {
				if err := s.Close(ctx); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: ErrSessionClosed,
			within:  time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, ctx, e.Client())
			if s.TTL() != testTTL {
				t.Fatalf("TTL %v, want %v", s.TTL(), testTTL)
			}
			if _, err := admin.Put(ctx, "/bound", "x", clientv3.WithLease(s.Lease())); err != nil {
				t.Fatal(err)
			}
			// Outlive the TTL: renewals must keep it.
			time.Sleep(testTTL + 300*time.Millisecond)
			if err := s.Err(); err != nil {
				t.Fatalf("session ended on its own: %v", err)
			}
			if until := time.Until(s.Deadline()); until <= testTTL/2 {
				t.Fatalf("deadline only %v ahead after renewals", until)
			}
			tc.end(t, s)
			closedWithin(t, s.Done(), tc.within, "session done")
			if !errors.Is(s.Err(), tc.wantErr) {
				t.Fatalf("Err = %v, want %v", s.Err(), tc.wantErr)
			}
			got, err := admin.Get(ctx, "/bound")
			if err != nil || len(got.Kvs) != 0 {
				t.Fatalf("key bound to the lease survived: %v %v", got.Kvs, err)
			}
		})
	}
}

func TestManagerReplacesLostSession(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)
	m := NewManager(e.Client(), testOptions()...)
	t.Cleanup(func() { _ = m.Close(context.Background()) })

	s1, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, changed := m.Current()
	if cur != s1 {
		t.Fatalf("Current %p, Session %p", cur, s1)
	}
	if _, err := admin.Revoke(ctx, s1.Lease()); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, changed, testTTL, "replacement notice")
	s2, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s2 == s1 || s2.Lease() == s1.Lease() || s2.Err() != nil {
		t.Fatalf("not a new live session: %x after %x (err %v)", s2.Lease(), s1.Lease(), s2.Err())
	}

	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ttl, err := admin.TimeToLive(ctx, s2.Lease())
	if err != nil || ttl.TTL != -1 {
		t.Fatalf("lease not revoked by Close: ttl %d, %v", ttl.TTL, err)
	}
	if _, err := m.Session(ctx); !errors.Is(err, ErrManagerClosed) {
		t.Fatalf("Session after Close: %v", err)
	}
}

// The manager keeps trying while etcd is unreachable and comes back with a
// new session once it answers again.
func TestManagerSurvivesOutage(t *testing.T) {
	testenv.Slow(t)
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	p := testenv.StartProxy(t, e.Endpoint())
	ctx := testCtx(t)
	m := NewManager(newClient(t, p.URL()), testOptions()...)
	t.Cleanup(func() { _ = m.Close(context.Background()) })

	s1, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Down()
	closedWithin(t, s1.Done(), testTTL+time.Second, "session lost during outage")
	if !errors.Is(s1.Err(), ErrKeepAliveTimeout) {
		t.Fatalf("Err = %v, want %v", s1.Err(), ErrKeepAliveTimeout)
	}
	time.Sleep(testTTL) // grants fail meanwhile
	p.Up()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s2, err := m.Session(wctx)
	if err != nil {
		t.Fatalf("no session after etcd came back: %v", err)
	}
	if s2.Lease() == s1.Lease() {
		t.Fatal("reused the lost lease")
	}
}
