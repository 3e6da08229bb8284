package defs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Backfills and reruns live at <prefix>schedule-backfill/<tenant>/<name>#<id>
// (a legacy definition's: <prefix>schedule-backfill/<name>#<id>; names
// hold no #, so one schedule's never share a prefix with another's). The
// API creates one; from then on only the federation leader writes it, under
// its election key and the record's create revision (a schedule deleted
// meanwhile takes its backfills with it).

// BackfillRecord is a backfill as stored.
type BackfillRecord struct {
	apiv1.Backfill
	DefRev int64 `json:"def_rev"` // the definition generation it belongs to
	// Attempt is added to each slot, in milliseconds, in its runs' ids: 0
	// for a backfill (a period run already is not run again), the rerun's
	// number for a rerun (a new run).
	Attempt int        `json:"attempt,omitempty"`
	Next    *time.Time `json:"next,omitempty"` // the first slot not started (nil: all started)
	Leader  int64      `json:"leader_token,omitempty"`
}

// StoredBackfill is a record with its key, create and mod revisions.
type StoredBackfill struct {
	Rec    *BackfillRecord
	Key    string
	Rev    int64
	ModRev int64
}

// BackfillPrefix is the prefix of every backfill of the definition at key.
func (st Store) BackfillPrefix(defKey string) string {
	return st.prefix + "schedule-backfill/" + strings.TrimPrefix(defKey, st.prefix+"schedules/") + "#"
}

// DefKeyOf is the definition key a backfill key belongs to.
func (st Store) DefKeyOf(bfKey string) string {
	rest, _, _ := strings.Cut(strings.TrimPrefix(bfKey, st.prefix+"schedule-backfill/"), "#")
	return st.prefix + "schedules/" + rest
}

// CreateBackfills stores new backfills, recs[i] of sds[i], all or none,
// unless a definition changed generation; false when one of the ids is
// taken or a definition changed (draw other ids, or give up).
func (st Store) CreateBackfills(ctx context.Context, sds []Stored, recs []*BackfillRecord) (bool, error) {
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	for i, sd := range sds {
		b, err := json.Marshal(recs[i])
		if err != nil {
			return false, err
		}
		key := st.BackfillPrefix(sd.Key) + recs[i].ID
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.Compare(clientv3.CreateRevision(sd.Key), "=", sd.Rev))
		puts = append(puts, clientv3.OpPut(key, string(b)))
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, fmt.Errorf("schedule %s: create backfill: %w", sds[0].Def.Name, err)
	}
	return resp.Succeeded, nil
}

// BackfillsOf reads the backfills of the definition at defKey ("": every
// schedule's), oldest first.
func (st Store) BackfillsOf(ctx context.Context, defKey string) ([]StoredBackfill, error) {
	pfx := st.prefix + "schedule-backfill/"
	if defKey != "" {
		pfx = st.BackfillPrefix(defKey)
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("schedules: read backfills: %w", err)
	}
	out := make([]StoredBackfill, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec BackfillRecord
		if json.Unmarshal(kv.Value, &rec) == nil {
			out = append(out, StoredBackfill{Rec: &rec, Key: string(kv.Key), Rev: kv.CreateRevision, ModRev: kv.ModRevision})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rev < out[j].Rev })
	return out, nil
}

// PutBackfill writes a backfill's progress, only while l leads the
// federation and only while the record is as bs read it: ErrGone when it
// was deleted or changed (cancelled) meanwhile. It moves bs.modRev to the
// write's.
func (st Store) PutBackfill(ctx context.Context, l *lease.Leadership, bs *StoredBackfill) error {
	b, err := json.Marshal(bs.Rec)
	if err != nil {
		return err
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(l.Cmp()).
		Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(bs.Key), "=", bs.Rev), clientv3.Compare(clientv3.ModRevision(bs.Key), "=", bs.ModRev)},
			[]clientv3.Op{clientv3.OpPut(bs.Key, string(b))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule backfill %s: record: %w", bs.Key, err)
	}
	if !resp.Succeeded {
		return ErrNotLeader
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner == nil || !inner.Succeeded {
		return ErrGone
	}
	bs.ModRev = resp.Header.Revision
	return nil
}

// CancelBackfill moves the backfill id of the definition at defKey to
// CANCELED (by by, at now) unless it ended already, and returns it as it
// is then; found is false when there is none.
func (st Store) CancelBackfill(ctx context.Context, defKey string, defRev int64, id, by string, now time.Time) (rec *BackfillRecord, found bool, err error) {
	key := st.BackfillPrefix(defKey) + id
	for attempt := 0; attempt < 8; attempt++ {
		cctx, cancel := st.call(ctx)
		resp, err := st.c.Get(cctx, key)
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("schedule backfill %s: read: %w", id, err)
		}
		if len(resp.Kvs) == 0 {
			return nil, false, nil
		}
		kv := resp.Kvs[0]
		var r BackfillRecord
		if json.Unmarshal(kv.Value, &r) != nil || r.DefRev != defRev {
			return nil, false, nil
		}
		if r.State != apiv1.BackfillRunning {
			return &r, true, nil
		}
		r.State, r.FinishedAt, r.CanceledBy, r.Next = apiv1.BackfillCanceled, &now, by, nil
		b, err := json.Marshal(&r)
		if err != nil {
			return nil, false, err
		}
		cctx, cancel = st.call(ctx)
		tr, err := st.c.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(b))).Commit()
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("schedule backfill %s: cancel: %w", id, err)
		}
		if tr.Succeeded {
			return &r, true, nil
		}
	}
	return nil, false, fmt.Errorf("schedule backfill %s: cancel: concurrent writers", id)
}
