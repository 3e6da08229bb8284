package lease

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ax-sched/ax/internal/testenv"
)

const testSync = 200 * time.Millisecond

func startView(t *testing.T, c *clientv3.Client, prefix string, extra ...Option) *View {
	t.Helper()
	v := NewView(c, prefix, testOptions(append([]Option{WithSyncInterval(testSync)}, extra...)...)...)
	t.Cleanup(v.Close)
	select {
	case <-v.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("view not ready")
	}
	return v
}

func snapshotMap(s Snapshot) map[string]string {
	m := map[string]string{}
	for k, v := range s.All() {
		m[k] = string(v)
	}
	return m
}

// converge waits, on the view's change notifications, for want.
func converge(t *testing.T, v *View, want map[string]string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		changes := v.Changes()
		got := snapshotMap(v.Snapshot())
		if maps.Equal(got, want) {
			return
		}
		select {
		case <-changes:
		case <-deadline:
			t.Fatalf("view did not converge within %v (-got +want):\n%s", within, cmp.Diff(got, want))
		}
	}
}

func TestViewFollowsPrefix(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	ctx := testCtx(t)
	if _, err := admin.Put(ctx, "/ax/regions/a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, "/ax/other", "not watched"); err != nil {
		t.Fatal(err)
	}
	v := startView(t, admin, "/ax/regions/")
	first := v.Snapshot()
	if got := snapshotMap(first); !maps.Equal(got, map[string]string{"/ax/regions/a": "1"}) {
		t.Fatalf("first list: %v", got)
	}
	if !v.Healthy() || v.LastSync().IsZero() {
		t.Fatal("a listed view is healthy")
	}

	changes := v.Changes()
	steps := []struct {
		op   clientv3.Op
		want map[string]string
	}{
		{clientv3.OpPut("/ax/regions/b", "2"), map[string]string{"/ax/regions/a": "1", "/ax/regions/b": "2"}},
		{clientv3.OpPut("/ax/regions/a", "1b"), map[string]string{"/ax/regions/a": "1b", "/ax/regions/b": "2"}},
		{clientv3.OpDelete("/ax/regions/b"), map[string]string{"/ax/regions/a": "1b"}},
		{clientv3.OpDelete("/ax/regions/", clientv3.WithPrefix()), map[string]string{}},
	}
	for i, st := range steps {
		if _, err := admin.Do(ctx, st.op); err != nil {
			t.Fatal(err)
		}
		converge(t, v, st.want, 2*time.Second)
		if i == 0 {
			closedWithin(t, changes, time.Second, "change notification")
		}
	}
	// Snapshots are immutable: the first one has not moved.
	if got := snapshotMap(first); !maps.Equal(got, map[string]string{"/ax/regions/a": "1"}) {
		t.Fatalf("old snapshot changed: %v", got)
	}
	if v.Snapshot().Rev() <= first.Rev() {
		t.Fatalf("revision did not advance: %d → %d", first.Rev(), v.Snapshot().Rev())
	}
	// Idle, progress reports keep it fresh.
	time.Sleep(4 * testSync)
	if !v.Healthy() {
		t.Fatal("idle view reported unhealthy")
	}
}

// While etcd is unreachable the view serves the last snapshot and says it
// is stale. Changes made meanwhile, including deletes, are compacted away,
// so when etcd comes back the resumed watch is refused and the view must
// list again to converge.
func TestViewRelistsAfterCompaction(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	admin := e.Client()
	p := testenv.StartProxy(t, e.Endpoint())
	ctx := testCtx(t)
	log := &logRecorder{}
	v := startView(t, newClient(t, p.URL()), "/ax/", WithLogger(slog.New(log)))

	for _, k := range []string{"a", "b", "c"} {
		if _, err := admin.Put(ctx, "/ax/"+k, k); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, v, map[string]string{"/ax/a": "a", "/ax/b": "b", "/ax/c": "c"}, 2*time.Second)

	p.Down()
	eventually(t, 3*time.Second, "view reports itself stale", func() bool { return !v.Healthy() })
	if _, err := admin.Delete(ctx, "/ax/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, "/ax/b", "b2"); err != nil {
		t.Fatal(err)
	}
	last, err := admin.Put(ctx, "/ax/d", "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Compact(ctx, last.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if got := snapshotMap(v.Snapshot()); len(got) != 3 {
		t.Fatalf("last known view lost during the outage: %v", got)
	}

	p.Up()
	converge(t, v, map[string]string{"/ax/b": "b2", "/ax/c": "c", "/ax/d": "d"}, 10*time.Second)
	if !log.saw("compacted") {
		t.Fatal("converged without the compaction path (re-list)")
	}
	eventually(t, 2*time.Second, "healthy again", v.Healthy)

	// And it keeps following after the re-list.
	if _, err := admin.Put(ctx, "/ax/e", "e"); err != nil {
		t.Fatal(err)
	}
	converge(t, v, map[string]string{"/ax/b": "b2", "/ax/c": "c", "/ax/d": "d", "/ax/e": "e"}, 2*time.Second)
}
