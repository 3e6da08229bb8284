package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Schedule errors. The exported ones are what an API caller sees, so they
// carry their API code (see doc.go).
var (
	ErrExists   error = &apiv1.Error{Code: apiv1.CodeConflict, Message: "a schedule with this name exists", Field: "name"}
	ErrNotFound error = &apiv1.Error{Code: apiv1.CodeNotFound, Message: "no such schedule", Field: "name"}
	// errGone: the definition was deleted (or replaced) while the leader
	// was firing it; its state is not written.
	errGone = errors.New("schedule: deleted while firing")
	// errNotLeader: a state write found the election key no longer ours.
	errNotLeader = errors.New("schedule: no longer the federation leader")
)

// store keeps definitions and states in the global etcd.
type store struct {
	c       *clientv3.Client
	prefix  string // "/ax/"
	timeout time.Duration
}

func (st store) defKey(name string) string   { return st.prefix + "schedules/" + name }
func (st store) stateKey(name string) string { return st.prefix + "schedule-state/" + name }

// call bounds one etcd request and fails fast on a member without a raft
// leader (as package lease does).
func (st store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	return clientv3.WithRequireLeader(ctx), cancel
}

// stored is a definition with the revisions that identify it.
type stored struct {
	def    *apiv1.Schedule
	rev    int64 // create revision: a new one for a schedule created again
	modRev int64
}

// create writes a new definition and clears any state left under its name.
func (st store) create(ctx context.Context, d *apiv1.Schedule) (int64, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	key := st.defKey(d.Name)
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b)), clientv3.OpDelete(st.stateKey(d.Name))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("schedule %s: create: %w", d.Name, err)
	}
	if !resp.Succeeded {
		return 0, ErrExists
	}
	return resp.Header.Revision, nil
}

// get reads one definition.
func (st store) get(ctx context.Context, name string) (stored, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.defKey(name))
	if err != nil {
		return stored{}, fmt.Errorf("schedule %s: read: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return stored{}, ErrNotFound
	}
	kv := resp.Kvs[0]
	var d apiv1.Schedule
	if err := json.Unmarshal(kv.Value, &d); err != nil || d.Task == nil || d.Name != name {
		return stored{}, fmt.Errorf("schedule %s: stored definition is not one (%v)", name, err)
	}
	return stored{def: &d, rev: kv.CreateRevision, modRev: kv.ModRevision}, nil
}

// list reads every definition, sorted by name; unreadable ones are
// returned in bad.
func (st store) list(ctx context.Context) (defs []stored, bad []string, err error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.prefix+"schedules/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, nil, fmt.Errorf("schedules: list: %w", err)
	}
	for _, kv := range resp.Kvs {
		var d apiv1.Schedule
		if err := json.Unmarshal(kv.Value, &d); err != nil || string(kv.Key) != st.defKey(d.Name) || d.Task == nil {
			bad = append(bad, string(kv.Key))
			continue
		}
		defs = append(defs, stored{def: &d, rev: kv.CreateRevision, modRev: kv.ModRevision})
	}
	return defs, bad, nil
}

// states reads every schedule's state, by name.
func (st store) states(ctx context.Context) (map[string]State, error) {
	pfx := st.prefix + "schedule-state/"
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("schedules: read states: %w", err)
	}
	out := make(map[string]State, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var s State
		if json.Unmarshal(kv.Value, &s) == nil {
			out[strings.TrimPrefix(string(kv.Key), pfx)] = s
		}
	}
	return out, nil
}

// state reads one schedule's state; ok is false when it has none yet.
func (st store) state(ctx context.Context, name string) (State, bool, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.stateKey(name))
	if err != nil {
		return State{}, false, fmt.Errorf("schedule %s: read state: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return State{}, false, nil
	}
	var s State
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return State{}, false, nil
	}
	return s, true, nil
}

// remove deletes a definition and its state.
func (st store) remove(ctx context.Context, name string) error {
	key := st.defKey(name)
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(st.stateKey(name))).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: delete: %w", name, err)
	}
	if !resp.Succeeded {
		return ErrNotFound
	}
	return nil
}

// update changes a definition with f, guarded by its mod revision (another
// writer in between makes it read and try again).
func (st store) update(ctx context.Context, name string, f func(*apiv1.Schedule)) (stored, error) {
	for attempt := 0; ; attempt++ {
		cur, err := st.get(ctx, name)
		if err != nil {
			return stored{}, err
		}
		f(cur.def)
		b, err := json.Marshal(cur.def)
		if err != nil {
			return stored{}, err
		}
		key := st.defKey(name)
		cctx, cancel := st.call(ctx)
		resp, err := st.c.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.modRev)).
			Then(clientv3.OpPut(key, string(b))).
			Commit()
		cancel()
		if err != nil {
			return stored{}, fmt.Errorf("schedule %s: update: %w", name, err)
		}
		if resp.Succeeded {
			cur.modRev = resp.Header.Revision
			return cur, nil
		}
		if attempt >= 4 {
			return stored{}, fmt.Errorf("schedule %s: update: concurrent writers", name)
		}
	}
}

// advance writes a schedule's state, only while l leads the federation and
// only for the definition generation defRev. It returns
// errNotLeader when the election key is no longer ours, and
// errGone when the definition was deleted or created again.
func (st store) advance(ctx context.Context, l *lease.Leadership, name string, defRev int64, s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(l.Cmp()).
		Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(st.defKey(name)), "=", defRev)},
			[]clientv3.Op{clientv3.OpPut(st.stateKey(name), string(b))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: record slot: %w", name, err)
	}
	if !resp.Succeeded {
		return errNotLeader
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner == nil || !inner.Succeeded {
		return errGone
	}
	return nil
}
