// Package ends records the ends of the DAG runs schedules start, for the
// gates that wait for them (package dag's Upstreams): the home region of
// such a run records its end at <prefix>schedule-ends/<tenant>/<name> in
// the global etcd (one key per schedule, overwritten by each end) and every
// region's DAG reconciler watches that prefix, so a gate waiting for the
// run is read again when the run ends instead of on a timer. A watch may
// miss ends (it restarts after an error, the reconciler after a leader
// change): the reconciler reads every gate again on a slow timer too.
//
// Boundary: it imports task (the run states) and the etcd client only;
// package schedule deletes a schedule's key with the schedule (Key).
package ends

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ax-sched/ax/task"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Log records and watches run ends under one etcd prefix.
type Log struct {
	c      *clientv3.Client
	prefix string // "/ax/"
}

// New is the log of run ends kept in the global etcd c under prefix (the
// schedules' prefix; "" is "/ax/").
func New(c *clientv3.Client, prefix string) *Log {
	if prefix == "" {
		prefix = "/ax/"
	}
	return &Log{c: c, prefix: prefix}
}

// Key is where the last run end of tenant's schedule name is recorded.
func Key(prefix, tenant, name string) string { return keys(prefix) + tenant + "/" + name }

// keys is the prefix of every schedule's key.
func keys(prefix string) string { return prefix + "schedule-ends/" }

// record is a run's end as recorded for its waiters.
type record struct {
	RunID  string        `json:"run_id"`
	Period time.Time     `json:"period_start"`
	State  task.DAGState `json:"state"`
}

// callTimeout bounds one write.
const callTimeout = 5 * time.Second

// RunEnded records that the run id of tenant's schedule name, started for
// the period beginning at period, ended in state; it wakes the gates
// waiting for it (WatchEnds).
func (l *Log) RunEnded(ctx context.Context, tenant, name string, period time.Time, id string, state task.DAGState) error {
	b, err := json.Marshal(record{RunID: id, Period: period.UTC(), State: state})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), callTimeout)
	defer cancel()
	if _, err := l.c.Put(cctx, Key(l.prefix, tenant, name), string(b)); err != nil {
		return fmt.Errorf("schedule %s: record run end: %w", name, err)
	}
	return nil
}

// rewatch bounds how long WatchEnds waits before watching again after the
// watch failed.
const rewatch = time.Second

// WatchEnds calls wake with the tenant and schedule of every run end
// recorded (RunEnded) until ctx ends, from one goroutine. Whenever the
// watch starts (again), it first calls wake("", "") — every gate — since
// ends recorded while it was not watching were missed.
func (l *Log) WatchEnds(ctx context.Context, wake func(tenant, name string)) {
	pfx := keys(l.prefix)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := l.c.Watch(wctx, pfx, clientv3.WithPrefix())
		wake("", "")
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				rest := strings.TrimPrefix(string(ev.Kv.Key), pfx)
				if i := strings.LastIndexByte(rest, '/'); i > 0 {
					wake(rest[:i], rest[i+1:])
				}
			}
		}
		cancel()
		t := time.NewTimer(rewatch/2 + time.Duration(rand.Int64N(int64(rewatch/2))))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
