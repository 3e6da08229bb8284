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
	"github.com/ax-sched/ax/schedule/ends"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Schedule errors. The exported ones are what an API caller sees, so they
// carry their API code (see Scheduler).
var (
	ErrExists   error = &apiv1.Error{Code: apiv1.CodeConflict, Message: "this tenant has a schedule with this name", Field: "name"}
	ErrNotFound error = &apiv1.Error{Code: apiv1.CodeNotFound, Message: "no such schedule", Field: "name"}
	// errGone: the definition was deleted (or replaced) while the leader
	// was firing it; its state is not written.
	errGone = errors.New("schedule: deleted while firing")
	// errNotLeader: a state write found the election key no longer ours.
	errNotLeader = errors.New("schedule: no longer the federation leader")
)

// store keeps definitions and states in the global etcd. Each tenant has
// its own namespace: <prefix>schedules/<tenant>/<name> and
// <prefix>schedule-state/<tenant>/<name>. Definitions written before
// tenants had namespaces, at <prefix>schedules/<name> (their states at
// <prefix>schedule-state/<name>), stay where they are and are read as the
// schedule of their task's tenant (legacy): every operation finds them, and
// their slots keep the task ids they had.
type store struct {
	c       *clientv3.Client
	prefix  string // "/ax/"
	timeout time.Duration
}

func (st store) defKey(tenant, name string) string {
	return st.prefix + "schedules/" + tenant + "/" + name
}
func (st store) legacyKey(name string) string { return st.prefix + "schedules/" + name }

// stateKey is where the state of the definition stored at key lives.
func (st store) stateKey(key string) string {
	return st.prefix + "schedule-state/" + strings.TrimPrefix(key, st.prefix+"schedules/")
}

// call bounds one etcd request and fails fast on a member without a raft
// leader (as package lease does).
func (st store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	return clientv3.WithRequireLeader(ctx), cancel
}

// record is a definition as stored: the API's fields and, for one created
// since schedules draw their id sequence, that sequence (stored.idSeq).
type record struct {
	*apiv1.Schedule
	IDSeq *uint32 `json:"id_seq,omitempty"`
}

// stored is a definition with the key and revisions that identify it.
type stored struct {
	def    *apiv1.Schedule
	seq    *uint32 // its task ids' sequence; nil: derived (idSeq)
	key    string  // its etcd key
	legacy bool    // at <prefix>schedules/<name>, written before tenants had namespaces
	rev    int64   // create revision: a new one for a schedule created again
	modRev int64
}

// tenant is the tenant whose schedule it is: its task's.
func (sd stored) tenant() string { return tenantOf(sd.def) }

// idTenant is the tenant its task ids are derived with (TaskID): "" for
// a legacy definition, whose ids stay those it fired before.
func (sd stored) idTenant() string {
	if sd.legacy {
		return ""
	}
	return sd.tenant()
}

// tenantOf is a definition's tenant: its task's, "default" when unset (as
// a task submitted without one).
func tenantOf(d *apiv1.Schedule) string {
	switch {
	case d.DAG != nil && d.DAG.Tenant != "":
		return d.DAG.Tenant
	case d.Task == nil || d.Task.Tenant == "":
		return "default"
	}
	return d.Task.Tenant
}

// parse reads one definition of a list, or false when key does not hold
// one where it belongs.
func (st store) parse(kv *mvccpb.KeyValue) (stored, bool) {
	var d apiv1.Schedule
	rec := record{Schedule: &d}
	if err := json.Unmarshal(kv.Value, &rec); err != nil || d.Task == nil && d.DAG == nil {
		return stored{}, false
	}
	sd := stored{def: &d, seq: rec.IDSeq, key: string(kv.Key), rev: kv.CreateRevision, modRev: kv.ModRevision}
	switch sd.key {
	case st.defKey(tenantOf(&d), d.Name):
	case st.legacyKey(d.Name):
		sd.legacy = true
	default:
		return stored{}, false
	}
	return sd, true
}

// create writes a new definition, with its task ids' sequence, into its
// tenant's namespace and clears any state left under its key. legacyRev is
// the create revision of the legacy definition of the same name (another
// tenant's), 0 for none; listRev is the revision the caller counted the
// tenant's schedules at. The write fails if the legacy definition changed
// or a definition of the tenant was written since listRev (exists is then
// false: read again), so concurrent creates cannot pass the tenant's
// max_schedules together.
func (st store) create(ctx context.Context, d *apiv1.Schedule, seq uint32, legacyRev, listRev int64) (rev int64, exists bool, err error) {
	b, err := json.Marshal(record{Schedule: d, IDSeq: &seq})
	if err != nil {
		return 0, false, err
	}
	key := st.defKey(tenantOf(d), d.Name)
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(st.legacyKey(d.Name)), "=", legacyRev),
			clientv3.Compare(clientv3.ModRevision(st.defKey(tenantOf(d), "")), "<", listRev+1).WithPrefix()).
		Then(clientv3.OpPut(key, string(b)), clientv3.OpDelete(st.stateKey(key))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, false, fmt.Errorf("schedule %s: create: %w", d.Name, err)
	}
	if !resp.Succeeded {
		return 0, len(resp.Responses) > 0 && len(resp.Responses[0].GetResponseRange().Kvs) > 0, nil
	}
	return resp.Header.Revision, false, nil
}

// get reads tenant's definition name, in either layout.
func (st store) get(ctx context.Context, tenant, name string) (stored, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).Then(clientv3.OpGet(st.defKey(tenant, name)), clientv3.OpGet(st.legacyKey(name))).Commit()
	if err != nil {
		return stored{}, fmt.Errorf("schedule %s: read: %w", name, err)
	}
	for _, r := range resp.Responses {
		kvs := r.GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		sd, ok := st.parse(kvs[0])
		if !ok || sd.def.Name != name {
			return stored{}, fmt.Errorf("schedule %s: stored definition at %s is not one", name, kvs[0].Key)
		}
		if sd.tenant() == tenant {
			return sd, nil
		}
	}
	return stored{}, ErrNotFound
}

// reread reads the definition at sd's key again.
func (st store) reread(ctx context.Context, sd stored) (stored, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, sd.key)
	if err != nil {
		return stored{}, fmt.Errorf("schedule %s: read: %w", sd.def.Name, err)
	}
	if len(resp.Kvs) == 0 {
		return stored{}, ErrNotFound
	}
	cur, ok := st.parse(resp.Kvs[0])
	if !ok {
		return stored{}, fmt.Errorf("schedule %s: stored definition at %s is not one", sd.def.Name, sd.key)
	}
	return cur, nil
}

// list reads every definition of both layouts, sorted by key; unreadable
// ones are returned in bad.
func (st store) list(ctx context.Context) (defs []stored, bad []string, err error) {
	defs, bad, _, err = st.listAt(ctx)
	return defs, bad, err
}

// listAt is list with the etcd revision it read at.
func (st store) listAt(ctx context.Context) (defs []stored, bad []string, rev int64, err error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.prefix+"schedules/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("schedules: list: %w", err)
	}
	for _, kv := range resp.Kvs {
		sd, ok := st.parse(kv)
		if !ok {
			bad = append(bad, string(kv.Key))
			continue
		}
		defs = append(defs, sd)
	}
	return defs, bad, resp.Header.Revision, nil
}

// states reads every schedule's state, by its key.
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
			out[string(kv.Key)] = s
		}
	}
	return out, nil
}

// state reads the state of sd; ok is false when it has none yet.
func (st store) state(ctx context.Context, sd stored) (State, bool, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.stateKey(sd.key))
	if err != nil {
		return State{}, false, fmt.Errorf("schedule %s: read state: %w", sd.def.Name, err)
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

// remove deletes the definition sd, its state, its backfills and its last run end; a definition deleted or
// created again since sd was read is ErrNotFound.
func (st store) remove(ctx context.Context, sd stored) error {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(sd.key), "=", sd.rev)).
		Then(clientv3.OpDelete(sd.key), clientv3.OpDelete(st.stateKey(sd.key)),
			clientv3.OpDelete(st.backfillPrefix(sd.key), clientv3.WithPrefix()),
			clientv3.OpDelete(ends.Key(st.prefix, sd.tenant(), sd.def.Name))).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: delete: %w", sd.def.Name, err)
	}
	if !resp.Succeeded {
		return ErrNotFound
	}
	return nil
}

// update changes the definition sd with f, guarded by its mod revision
// (another writer in between makes it read and try again) and its create
// revision (one deleted and created again is ErrNotFound).
func (st store) update(ctx context.Context, sd stored, f func(*apiv1.Schedule)) (stored, error) {
	for attempt := 0; ; attempt++ {
		cur, err := st.reread(ctx, sd)
		if err != nil {
			return stored{}, err
		}
		if cur.rev != sd.rev {
			return stored{}, ErrNotFound
		}
		f(cur.def)
		b, err := json.Marshal(record{Schedule: cur.def, IDSeq: cur.seq})
		if err != nil {
			return stored{}, err
		}
		cctx, cancel := st.call(ctx)
		resp, err := st.c.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(cur.key), "=", cur.modRev)).
			Then(clientv3.OpPut(cur.key, string(b))).
			Commit()
		cancel()
		if err != nil {
			return stored{}, fmt.Errorf("schedule %s: update: %w", cur.def.Name, err)
		}
		if resp.Succeeded {
			cur.modRev = resp.Header.Revision
			return cur, nil
		}
		if attempt >= 4 {
			return stored{}, fmt.Errorf("schedule %s: update: concurrent writers", cur.def.Name)
		}
	}
}

// advance writes the state of the definition at key, only while l leads
// the federation and only for the definition generation defRev. It returns
// errNotLeader when the election key is no longer ours, and
// errGone when the definition was deleted or created again.
func (st store) advance(ctx context.Context, l *lease.Leadership, key string, defRev int64, s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(l.Cmp()).
		Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", defRev)},
			[]clientv3.Op{clientv3.OpPut(st.stateKey(key), string(b))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: record slot: %w", key, err)
	}
	if !resp.Succeeded {
		return errNotLeader
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner == nil || !inner.Succeeded {
		return errGone
	}
	return nil
}
