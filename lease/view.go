package lease

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A View keeps an in-memory copy of every key under a prefix: it lists the
// prefix, then watches from the list's revision + 1. When the watch breaks
// it resumes where it stopped, with backoff; when etcd has compacted that
// revision away it lists again. While etcd is unreachable the view keeps
// serving its last snapshot and says so (Healthy, LastSync).
//
// One goroutine, owned by the view, does all of this; Close stops it.
type View struct {
	c      *clientv3.Client
	prefix string
	o      options
	stop   context.CancelFunc
	exited chan struct{}
	ready  chan struct{}

	mu       sync.Mutex
	snap     Snapshot
	changed  chan struct{} // closed at the next change
	healthy  bool          // last health announced through changed
	lastSync time.Time
}

// Snapshot is an immutable copy of a prefix at one revision. Values are
// shared between snapshots: do not modify them.
type Snapshot struct {
	rev int64
	kvs map[string][]byte
}

// Rev is the etcd revision the snapshot reflects (0 before the first list).
func (s Snapshot) Rev() int64 { return s.rev }

// Len is the number of keys.
func (s Snapshot) Len() int { return len(s.kvs) }

// Get returns the value of a full key.
func (s Snapshot) Get(key string) ([]byte, bool) {
	v, ok := s.kvs[key]
	return v, ok
}

// All yields every key (full key, prefix included) and value, in key order.
func (s Snapshot) All() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, k := range slices.Sorted(maps.Keys(s.kvs)) {
			if !yield(k, s.kvs[k]) {
				return
			}
		}
	}
}

// Map returns a copy of the snapshot's keys and values.
func (s Snapshot) Map() map[string][]byte {
	m := make(map[string][]byte, len(s.kvs))
	for k, v := range s.kvs {
		m[k] = bytes.Clone(v)
	}
	return m
}

// NewView starts watching prefix. Options: WithSyncInterval, WithCallTimeout,
// WithLogger.
func NewView(c *clientv3.Client, prefix string, opts ...Option) *View {
	ctx, cancel := context.WithCancel(context.Background())
	v := &View{
		c: c, prefix: prefix, o: newOptions(opts),
		stop: cancel, exited: make(chan struct{}), ready: make(chan struct{}),
		changed: make(chan struct{}),
	}
	go v.run(ctx)
	return v
}

// Ready is closed after the first successful list.
func (v *View) Ready() <-chan struct{} { return v.ready }

// Snapshot returns the current snapshot; it is cheap and never blocks on etcd.
func (v *View) Snapshot() Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.snap
}

// Changes returns a channel closed at the next change of the snapshot or of
// Healthy. Changes coalesce, and the watcher never waits for a reader: take
// the channel, read the snapshot, then wait on the channel.
func (v *View) Changes() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// Healthy reports whether the view is current: its watch is established and
// etcd has confirmed it within the last three sync intervals. When false,
// the snapshot is the last known state ("global etcd unreachable, running on
// last known view").
func (v *View) Healthy() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.healthy && time.Since(v.lastSync) <= v.staleAfter()
}

// LastSync is when etcd last confirmed the view (a list, an event, or a
// progress report); zero before the first list.
func (v *View) LastSync() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastSync
}

// Close stops the view's goroutine and waits for it. The last snapshot stays
// readable.
func (v *View) Close() {
	v.stop()
	<-v.exited
}

func (v *View) staleAfter() time.Duration { return 3 * v.o.syncInterval }

func (v *View) run(ctx context.Context) {
	defer close(v.exited)
	bo := newBackoff(50*time.Millisecond, max(v.o.syncInterval, time.Second))
	var rev int64 // last revision applied; 0: list first
	for ctx.Err() == nil {
		if rev == 0 {
			r, err := v.list(ctx)
			if err != nil {
				if ctx.Err() == nil {
					v.o.logger.Warn("view: list failed, serving last known view", "prefix", v.prefix, "err", err)
				}
				v.setHealthy(false)
				sleep(ctx, bo.next())
				continue
			}
			rev = r
		}
		next, err := v.watch(ctx, rev+1, bo)
		rev = next
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, rpctypes.ErrCompacted):
			v.o.logger.Info("view: watch revision compacted, listing again", "prefix", v.prefix, "rev", rev)
			rev = 0
		default:
			v.o.logger.Warn("view: watch broken, resuming", "prefix", v.prefix, "rev", rev, "err", err)
			v.setHealthy(false)
			sleep(ctx, bo.next())
		}
	}
}

// list replaces the snapshot with a fresh read of the prefix.
func (v *View) list(ctx context.Context) (int64, error) {
	cctx, cancel := v.o.call(ctx)
	resp, err := v.c.Get(cctx, v.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return 0, err
	}
	kvs := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv.Value
	}
	rev := resp.Header.Revision
	v.mu.Lock()
	dataChanged := !maps.EqualFunc(v.snap.kvs, kvs, bytes.Equal)
	v.snap = Snapshot{rev: rev, kvs: kvs}
	v.synced(dataChanged)
	v.mu.Unlock()
	select {
	case <-v.ready:
	default:
		close(v.ready)
	}
	return rev, nil
}

var (
	errWatchClosed = errors.New("lease: view: watch channel closed")
)

// watch applies events from fromRev on. It returns the last revision
// applied and why it stopped.
func (v *View) watch(ctx context.Context, fromRev int64, bo *backoff) (int64, error) {
	rev := fromRev - 1
	// The progress requests below must carry the same metadata as the watch
	// to reach its gRPC stream.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := v.c.Watch(wctx, v.prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRev))
	tick := time.NewTicker(v.o.syncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return rev, ctx.Err()
		case <-tick.C:
			// The client resumes a watch by itself once etcd is back, so a
			// silent watch is only reported, not restarted.
			if time.Since(v.LastSync()) > v.staleAfter() {
				v.setHealthy(false)
			}
			pctx, pcancel := context.WithTimeout(wctx, v.o.callTimeout)
			if err := v.c.RequestProgress(pctx); err != nil {
				v.o.logger.Debug("view: progress request failed", "prefix", v.prefix, "err", err)
			}
			pcancel()
		case wr, ok := <-wch:
			if !ok {
				return rev, errWatchClosed
			}
			if wr.CompactRevision != 0 {
				return rev, rpctypes.ErrCompacted
			}
			if wr.Canceled || wr.Err() != nil {
				return rev, errors.Join(errWatchClosed, wr.Err())
			}
			bo.reset()
			v.apply(&wr, &rev)
		}
	}
}

// apply copies the snapshot with the events applied (copy on write: readers
// keep the old map) and records that etcd answered.
func (v *View) apply(wr *clientv3.WatchResponse, rev *int64) {
	if wr.IsProgressNotify() {
		*rev = max(*rev, wr.Header.Revision)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(wr.Events) == 0 {
		v.snap.rev = max(v.snap.rev, *rev)
		v.synced(false)
		return
	}
	kvs := maps.Clone(v.snap.kvs)
	if kvs == nil {
		kvs = map[string][]byte{}
	}
	for _, ev := range wr.Events {
		switch ev.Type {
		case mvccpb.PUT:
			kvs[string(ev.Kv.Key)] = ev.Kv.Value
		case mvccpb.DELETE:
			delete(kvs, string(ev.Kv.Key))
		}
		*rev = max(*rev, ev.Kv.ModRevision)
	}
	v.snap = Snapshot{rev: *rev, kvs: kvs}
	v.synced(true)
}

// synced records an answer from etcd; v.mu is held.
func (v *View) synced(dataChanged bool) {
	v.lastSync = time.Now()
	if dataChanged || !v.healthy {
		v.healthy = true
		v.notify()
	}
}

func (v *View) setHealthy(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.healthy != on {
		v.healthy = on
		v.notify()
	}
}

// notify wakes every reader waiting on Changes; v.mu is held.
func (v *View) notify() {
	close(v.changed)
	v.changed = make(chan struct{})
}
