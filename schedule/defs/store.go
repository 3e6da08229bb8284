// Package defs keeps the schedules' definitions, states and backfills in
// the global etcd: their key layout and every read and guarded write of
// them. Package schedule serves the API and fires the slots over it.
package defs

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
	"github.com/ax-sched/ax/schedule/runid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Schedule errors. The exported ones are what an API caller sees, so they
// carry their API code (package schedule's Scheduler).
var (
	ErrExists   error = &apiv1.Error{Code: apiv1.CodeConflict, Message: "this tenant has a schedule with this name", Field: "name"}
	ErrNotFound error = &apiv1.Error{Code: apiv1.CodeNotFound, Message: "no such schedule", Field: "name"}
	// ErrGone: the definition was deleted (or replaced) while the leader
	// was firing it; its state is not written.
	ErrGone = errors.New("schedule: deleted while firing")
	// ErrNotLeader: a state write found the election key no longer ours.
	ErrNotLeader = errors.New("schedule: no longer the federation leader")
)

// Store keeps definitions and states in the global etcd. Each tenant has
// its own namespace: <prefix>schedules/<tenant>/<name> and
// <prefix>schedule-state/<tenant>/<name>. Definitions written before
// tenants had namespaces, at <prefix>schedules/<name> (their states at
// <prefix>schedule-state/<name>), stay where they are and are read as the
// schedule of their task's tenant (legacy): every operation finds them, and
// their slots keep the task ids they had.
type Store struct {
	c       *clientv3.Client
	prefix  string // "/ax/"
	timeout time.Duration
}

// New is the store kept in the global etcd c under prefix ("/ax/"), each
// request bounded by timeout.
func New(c *clientv3.Client, prefix string, timeout time.Duration) Store {
	return Store{c: c, prefix: prefix, timeout: timeout}
}

// Client is the etcd client the store uses.
func (st Store) Client() *clientv3.Client { return st.c }

// DefKey is where tenant's definition name is stored; LegacyKey where a
// definition written before tenants had namespaces is.
func (st Store) DefKey(tenant, name string) string {
	return st.prefix + "schedules/" + tenant + "/" + name
}
func (st Store) LegacyKey(name string) string { return st.prefix + "schedules/" + name }

// StateKey is where the state of the definition stored at key lives.
func (st Store) StateKey(key string) string {
	return st.prefix + "schedule-state/" + strings.TrimPrefix(key, st.prefix+"schedules/")
}

// call bounds one etcd request and fails fast on a member without a raft
// leader (as package lease does).
func (st Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	return clientv3.WithRequireLeader(ctx), cancel
}

// record is a definition as stored: the API's fields and, for one created
// since schedules draw their id sequence, that sequence (Stored.idSeq).
type record struct {
	*apiv1.Schedule
	IDSeq *uint32 `json:"id_seq,omitempty"`
}

// Stored is a definition with the key and revisions that identify it.
type Stored struct {
	Def    *apiv1.Schedule
	Seq    *uint32 // its task ids' sequence; nil: derived (idSeq)
	Key    string  // its etcd key
	Legacy bool    // at <prefix>schedules/<name>, written before tenants had namespaces
	Rev    int64   // create revision: a new one for a schedule created again
	ModRev int64
}

// Tenant is the tenant whose schedule it is: its task's.
func (sd Stored) Tenant() string { return TenantOf(sd.Def) }

// IDTenant is the tenant its task ids are derived with (TaskID): "" for
// a legacy definition, whose ids stay those it fired before.
func (sd Stored) IDTenant() string {
	if sd.Legacy {
		return ""
	}
	return sd.Tenant()
}

// TenantOf is a definition's tenant: its task's, "default" when unset (as
// a task submitted without one).
func TenantOf(d *apiv1.Schedule) string {
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
func (st Store) parse(kv *mvccpb.KeyValue) (Stored, bool) {
	var d apiv1.Schedule
	rec := record{Schedule: &d}
	if err := json.Unmarshal(kv.Value, &rec); err != nil || d.Task == nil && d.DAG == nil {
		return Stored{}, false
	}
	sd := Stored{Def: &d, Seq: rec.IDSeq, Key: string(kv.Key), Rev: kv.CreateRevision, ModRev: kv.ModRevision}
	switch sd.Key {
	case st.DefKey(TenantOf(&d), d.Name):
	case st.LegacyKey(d.Name):
		sd.Legacy = true
	default:
		return Stored{}, false
	}
	return sd, true
}

// Create writes a new definition, with its task ids' sequence, into its
// tenant's namespace and clears any state left under its key. legacyRev is
// the create revision of the legacy definition of the same name (another
// tenant's), 0 for none; listRev is the revision the caller counted the
// tenant's schedules at. The write fails if the legacy definition changed
// or a definition of the tenant was written since listRev (exists is then
// false: read again), so concurrent creates cannot pass the tenant's
// max_schedules together.
func (st Store) Create(ctx context.Context, d *apiv1.Schedule, seq uint32, legacyRev, listRev int64) (rev int64, exists bool, err error) {
	b, err := json.Marshal(record{Schedule: d, IDSeq: &seq})
	if err != nil {
		return 0, false, err
	}
	key := st.DefKey(TenantOf(d), d.Name)
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(st.LegacyKey(d.Name)), "=", legacyRev),
			clientv3.Compare(clientv3.ModRevision(st.DefKey(TenantOf(d), "")), "<", listRev+1).WithPrefix()).
		Then(clientv3.OpPut(key, string(b)), clientv3.OpDelete(st.StateKey(key))).
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

// Get reads tenant's definition name, in either layout.
func (st Store) Get(ctx context.Context, tenant, name string) (Stored, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).Then(clientv3.OpGet(st.DefKey(tenant, name)), clientv3.OpGet(st.LegacyKey(name))).Commit()
	if err != nil {
		return Stored{}, fmt.Errorf("schedule %s: read: %w", name, err)
	}
	for _, r := range resp.Responses {
		kvs := r.GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		sd, ok := st.parse(kvs[0])
		if !ok || sd.Def.Name != name {
			return Stored{}, fmt.Errorf("schedule %s: Stored definition at %s is not one", name, kvs[0].Key)
		}
		if sd.Tenant() == tenant {
			return sd, nil
		}
	}
	return Stored{}, ErrNotFound
}

// Reread reads the definition at sd's key again.
func (st Store) Reread(ctx context.Context, sd Stored) (Stored, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, sd.Key)
	if err != nil {
		return Stored{}, fmt.Errorf("schedule %s: read: %w", sd.Def.Name, err)
	}
	if len(resp.Kvs) == 0 {
		return Stored{}, ErrNotFound
	}
	cur, ok := st.parse(resp.Kvs[0])
	if !ok {
		return Stored{}, fmt.Errorf("schedule %s: Stored definition at %s is not one", sd.Def.Name, sd.Key)
	}
	return cur, nil
}

// List reads every definition of both layouts, sorted by key; unreadable
// ones are returned in bad.
func (st Store) List(ctx context.Context) (defs []Stored, bad []string, err error) {
	defs, bad, _, err = st.ListAt(ctx)
	return defs, bad, err
}

// ListAt is List with the etcd revision it read at.
func (st Store) ListAt(ctx context.Context) (defs []Stored, bad []string, rev int64, err error) {
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

// States reads every schedule's state, by its key.
func (st Store) States(ctx context.Context) (map[string]State, error) {
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

// State reads the state of sd; ok is false when it has none yet.
func (st Store) State(ctx context.Context, sd Stored) (State, bool, error) {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, st.StateKey(sd.Key))
	if err != nil {
		return State{}, false, fmt.Errorf("schedule %s: read state: %w", sd.Def.Name, err)
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

// Remove deletes the definition sd, its state, its backfills and its last run end; a definition deleted or
// created again since sd was read is ErrNotFound.
func (st Store) Remove(ctx context.Context, sd Stored) error {
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(sd.Key), "=", sd.Rev)).
		Then(clientv3.OpDelete(sd.Key), clientv3.OpDelete(st.StateKey(sd.Key)),
			clientv3.OpDelete(st.BackfillPrefix(sd.Key), clientv3.WithPrefix()),
			clientv3.OpDelete(ends.Key(st.prefix, sd.Tenant(), sd.Def.Name))).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: delete: %w", sd.Def.Name, err)
	}
	if !resp.Succeeded {
		return ErrNotFound
	}
	return nil
}

// Update changes the definition sd with f, guarded by its mod revision
// (another writer in between makes it read and try again) and its create
// revision (one deleted and created again is ErrNotFound).
func (st Store) Update(ctx context.Context, sd Stored, f func(*apiv1.Schedule)) (Stored, error) {
	for attempt := 0; ; attempt++ {
		cur, err := st.Reread(ctx, sd)
		if err != nil {
			return Stored{}, err
		}
		if cur.Rev != sd.Rev {
			return Stored{}, ErrNotFound
		}
		f(cur.Def)
		b, err := json.Marshal(record{Schedule: cur.Def, IDSeq: cur.Seq})
		if err != nil {
			return Stored{}, err
		}
		cctx, cancel := st.call(ctx)
		resp, err := st.c.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(cur.Key), "=", cur.ModRev)).
			Then(clientv3.OpPut(cur.Key, string(b))).
			Commit()
		cancel()
		if err != nil {
			return Stored{}, fmt.Errorf("schedule %s: update: %w", cur.Def.Name, err)
		}
		if resp.Succeeded {
			cur.ModRev = resp.Header.Revision
			return cur, nil
		}
		if attempt >= 4 {
			return Stored{}, fmt.Errorf("schedule %s: update: concurrent writers", cur.Def.Name)
		}
	}
}

// Advance writes the state of the definition at key, only while l leads
// the federation and only for the definition generation defRev. It returns
// ErrNotLeader when the election key is no longer ours, and
// ErrGone when the definition was deleted or created again.
func (st Store) Advance(ctx context.Context, l *lease.Leadership, key string, defRev int64, s State) error {
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
			[]clientv3.Op{clientv3.OpPut(st.StateKey(key), string(b))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule %s: record slot: %w", key, err)
	}
	if !resp.Succeeded {
		return ErrNotLeader
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner == nil || !inner.Succeeded {
		return ErrGone
	}
	return nil
}

// State is <prefix>schedule-state/<tenant>/<name> (a legacy definition's
// <prefix>schedule-state/<name>), written by the leader.
type State struct {
	// DefRev is the create revision of the definition this state belongs
	// to: a schedule deleted and created again starts afresh.
	DefRev        int64      `json:"def_rev"`
	LastSlot      time.Time  `json:"last_slot"`
	LastOutcome   string     `json:"last_outcome"`
	LastFiredSlot *time.Time `json:"last_fired_slot,omitempty"`
	LastTaskID    string     `json:"last_task_id,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Leader        int64      `json:"leader_token"` // fencing token of the term that wrote it
}

// IDSeq is the sequence part of the schedule's task ids: the one drawn at
// its creation (runid.NewSeq), or, for a definition Stored without one (created
// by an earlier version), runid.DerivedSeq of its tenant and name — "" for a
// legacy definition — so its slots keep the ids they had.
func (sd Stored) IDSeq() uint64 {
	if sd.Seq != nil {
		return uint64(*sd.Seq)
	}
	return runid.DerivedSeq(sd.IDTenant(), sd.Def.Name)
}
