package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ax-sched/ax/internal/testenv"
)

const testElection = "/ax/elect/region/test"

type campaignResult struct {
	l   *Leadership
	err error
	at  time.Time
}

// campaign runs Campaign in a goroutine that the test waits for.
func campaign(t *testing.T, ctx context.Context, s *Session, value string) <-chan campaignResult {
	t.Helper()
	ch := make(chan campaignResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l, err := Campaign(ctx, s, testElection, value)
		ch <- campaignResult{l, err, time.Now()}
	}()
	t.Cleanup(wg.Wait)
	return ch
}

func resignOnCleanup(t *testing.T, l *Leadership) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Resign(ctx)
	})
}

func mustLead(t *testing.T, ch <-chan campaignResult, within time.Duration) campaignResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("campaign: %v", r.err)
		}
		resignOnCleanup(t, r.l)
		return r
	case <-time.After(within):
		t.Fatalf("not elected within %v", within)
		return campaignResult{}
	}
}

func mustWait(t *testing.T, ch <-chan campaignResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("second leader while the first leads: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestElectorFailover(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)

	type term struct {
		who   string
		token int64
		l     *Leadership
		ctx   context.Context
	}
	terms := make(chan term, 8)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b"} {
		el := NewElector(e.Client(), testElection, who, testOptions()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = el.Run(runCtx, func(ctx context.Context, l *Leadership) {
				terms <- term{who, l.Token(), l, ctx}
				<-ctx.Done()
			})
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	var first term
	select {
	case first = <-terms:
	case <-time.After(5 * time.Second):
		t.Fatal("nobody elected")
	}
	select {
	case x := <-terms:
		t.Fatalf("two leaders: %s and %s", first.who, x.who)
	case <-time.After(500 * time.Millisecond):
	}
	ldr, err := Observe(ctx, admin, testElection)
	if err != nil || ldr.Value != first.who || ldr.Token != first.token {
		t.Fatalf("Observe = %+v, %v; want %s with token %d", ldr, err, first.who, first.token)
	}

	// The leader's lease expires (revoked from outside, as etcd would).
	if _, err := admin.Revoke(ctx, ldr.Lease); err != nil {
		t.Fatal(err)
	}
	var second term
	select {
	case second = <-terms:
	case <-time.After(2 * testTTL):
		t.Fatalf("no new leader within 2×TTL")
	}
	if second.who == first.who || second.token <= first.token {
		t.Fatalf("second term %s/%d after %s/%d: want the other candidate and a higher token",
			second.who, second.token, first.who, first.token)
	}
	closedWithin(t, first.l.Done(), testTTL, "old leadership Done")
	closedWithin(t, first.ctx.Done(), time.Second, "old lead ctx")
	if !errors.Is(first.l.Err(), ErrLeaderKeyDeleted) && !errors.Is(first.l.Err(), ErrLeaseExpired) {
		t.Fatalf("old term ended with %v", first.l.Err())
	}
	if second.l.Err() != nil {
		t.Fatalf("new term already over: %v", second.l.Err())
	}
}

func TestLeadershipEnds(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)

	tests := []struct {
		name    string
		end     func(t *testing.T, l *Leadership)
		wantErr error
	}{
		{
			name: "leader key deleted",
			end: func(t *testing.T, l *Leadership) {
				if _, err := admin.Delete(ctx, l.Key()); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: ErrLeaderKeyDeleted,
		},
		{
			name:    "lost after a fenced write",
			end:     func(t *testing.T, l *Leadership) { l.Lost(errFencedForTest) },
			wantErr: errFencedForTest,
		},
		{
			name: "resigned",
			end: func(t *testing.T, l *Leadership) {
				if err := l.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: ErrResigned,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leader := mustLead(t, campaign(t, ctx, newSession(t, ctx, e.Client()), "leader"), 5*time.Second)
			standby := campaign(t, ctx, newSession(t, ctx, e.Client()), "standby")
			mustWait(t, standby)

			tc.end(t, leader.l)
			took := closedWithin(t, leader.l.Done(), time.Second, "Done")
			if !errors.Is(leader.l.Err(), tc.wantErr) {
				t.Fatalf("Err = %v, want %v", leader.l.Err(), tc.wantErr)
			}
			t.Logf("Done after %v", took)
			// Lost leaves the key to Resign; the others already removed it.
			if err := leader.l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			next := mustLead(t, standby, testTTL)
			if next.l.Token() <= leader.l.Token() {
				t.Fatalf("token %d after %d", next.l.Token(), leader.l.Token())
			}
			if err := next.l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

var errFencedForTest = errors.New("fenced: higher token seen")

// etcd-io/etcd#11051: Campaign could report success after the session's lease
// had expired while it waited. Here the waiting candidate's lease is revoked
// and the leader resigns right after, before the candidate's keepalive can
// notice: the candidate must not come back as leader.
func TestCampaignRefusesDeadSession(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)

	for i := range 3 {
		leader := mustLead(t, campaign(t, ctx, newSession(t, ctx, e.Client()), "leader"), 5*time.Second)
		s := newSession(t, ctx, e.Client())
		waiting := campaign(t, ctx, s, "doomed")
		mustWait(t, waiting)

		if _, err := admin.Revoke(ctx, s.Lease()); err != nil {
			t.Fatal(err)
		}
		if err := leader.l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-waiting:
			if r.err == nil {
				resignOnCleanup(t, r.l)
				t.Fatalf("round %d: elected on a revoked lease (token %d)", i, r.l.Token())
			}
			t.Logf("round %d: %v", i, r.err)
			if !errors.Is(r.err, ErrNotLeader) && !errors.Is(r.err, ErrLeaseExpired) {
				t.Fatalf("round %d: err %v", i, r.err)
			}
		case <-time.After(2 * testTTL):
			t.Fatalf("round %d: campaign on a revoked lease still waiting", i)
		}
		if _, err := Observe(ctx, admin, testElection); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("round %d: Observe: %v, want no leader", i, err)
		}
	}

	// A session that already ended is refused outright.
	s := newSession(t, ctx, e.Client())
	s.Orphan()
	if _, err := Campaign(ctx, s, testElection, "late"); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("campaign on a closed session: %v", err)
	}
}

// Revoking the leader's lease right after it is elected ends the term at
// once (the key watch sees the delete before the keepalive notices).
func TestLeadershipLostWithLease(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)
	s := newSession(t, ctx, e.Client())
	r := mustLead(t, campaign(t, ctx, s, "x"), 5*time.Second)
	if _, err := admin.Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	took := closedWithin(t, r.l.Done(), testTTL, "Done after revoke")
	if took > testTTL/2 {
		t.Fatalf("lost after %v; the key watch should be prompt", took)
	}
}

// A leader that cannot reach etcd must consider itself deposed within the
// TTL, before etcd expires its lease and elects someone else.
func TestLeadershipLostOnEtcdStall(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	p := testenv.StartProxy(t, e.Endpoint())
	ctx := testCtx(t)

	stalled := newSession(t, ctx, newClient(t, p.URL()))
	leader := mustLead(t, campaign(t, ctx, stalled, "stalled"), 5*time.Second)
	standby := campaign(t, ctx, newSession(t, ctx, e.Client()), "standby")
	mustWait(t, standby)

	p.Freeze()
	frozenAt := time.Now()
	closedWithin(t, leader.l.Done(), testTTL+time.Second, "Done after the stall")
	lostAfter := time.Since(frozenAt)
	if !errors.Is(leader.l.Err(), ErrKeepAliveTimeout) {
		t.Fatalf("Err = %v, want %v", leader.l.Err(), ErrKeepAliveTimeout)
	}
	if lostAfter > testTTL {
		t.Fatalf("declared lost %v after the stall; want within the TTL (%v)", lostAfter, testTTL)
	}
	next := mustLead(t, standby, 2*testTTL)
	if !next.at.After(frozenAt.Add(lostAfter)) {
		t.Fatal("new leader elected before the stalled one stepped down")
	}
	if next.l.Token() <= leader.l.Token() {
		t.Fatalf("token %d after %d", next.l.Token(), leader.l.Token())
	}
	t.Logf("stalled leader stepped down after %v; standby elected %v after the stall",
		lostAfter, next.at.Sub(frozenAt))
	p.Thaw()
}

// The same when the etcd server itself stops.
func TestLeadershipLostOnEtcdStop(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	ctx := testCtx(t)
	s := newSession(t, ctx, e.Client())
	r := mustLead(t, campaign(t, ctx, s, "x"), 5*time.Second)
	e.Server().Server.HardStop()
	closedWithin(t, r.l.Done(), testTTL+time.Second, "Done after etcd stopped")
	if !errors.Is(r.l.Err(), ErrKeepAliveTimeout) {
		t.Fatalf("Err = %v, want %v", r.l.Err(), ErrKeepAliveTimeout)
	}
}

func TestObserveAndProclaim(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)
	if _, err := Observe(ctx, admin, testElection); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("empty election: %v", err)
	}
	// Another election whose name extends ours must not count.
	other := newSession(t, ctx, e.Client())
	ol, err := Campaign(ctx, other, testElection+"-west", "other")
	if err != nil {
		t.Fatal(err)
	}
	resignOnCleanup(t, ol)
	if _, err := Observe(ctx, admin, testElection); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("prefix leaked into a sibling election: %v", err)
	}

	s := newSession(t, ctx, e.Client())
	r := mustLead(t, campaign(t, ctx, s, "v1"), 5*time.Second)
	if err := r.l.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	ldr, err := Observe(ctx, admin, testElection)
	want := Leader{Key: r.l.Key(), Value: "v2", Token: r.l.Token(), Lease: s.Lease()}
	if err != nil || ldr != want {
		t.Fatalf("Observe = %+v, %v; want %+v", ldr, err, want)
	}
	// Cmp guards leader-only etcd writes.
	tx, err := admin.Txn(ctx).If(r.l.Cmp()).Then(clientv3.OpPut("/ax/schedules/x/last", "1")).Commit()
	if err != nil || !tx.Succeeded {
		t.Fatalf("guarded write while leader: %v %v", tx, err)
	}
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = admin.Txn(ctx).If(r.l.Cmp()).Then(clientv3.OpPut("/ax/schedules/x/last", "2")).Commit()
	if err != nil || tx.Succeeded {
		t.Fatalf("guarded write after resign: %v %v", tx, err)
	}
	if err := r.l.Proclaim(ctx, "v3"); !errors.Is(err, ErrResigned) {
		t.Fatalf("Proclaim after resign: %v", err)
	}
}
