package schedule

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

// bfRecord is a backfill as stored.
type bfRecord struct {
	apiv1.Backfill
	DefRev int64 `json:"def_rev"` // the definition generation it belongs to
	// Attempt is added to each slot, in milliseconds, in its runs' ids: 0
	// for a backfill (a period run already is not run again), the rerun's
	// number for a rerun (a new run).
	Attempt int        `json:"attempt,omitempty"`
	Next    *time.Time `json:"next,omitempty"` // the first slot not started (nil: all started)
	Leader  int64      `json:"leader_token,omitempty"`
}

// bfStored is a record with its key, create and mod revisions.
type bfStored struct {
	rec    *bfRecord
	key    string
	rev    int64
	modRev int64
}

// backfillPrefix is the prefix of every backfill of the definition at key.
func (st store) backfillPrefix(defKey string) string {
	return st.prefix + "schedule-backfill/" + strings.TrimPrefix(defKey, st.prefix+"schedules/") + "#"
}

// defKeyOf is the definition key a backfill key belongs to.
func (st store) defKeyOf(bfKey string) string {
	rest, _, _ := strings.Cut(strings.TrimPrefix(bfKey, st.prefix+"schedule-backfill/"), "#")
	return st.prefix + "schedules/" + rest
}

// createBackfill stores a new backfill of sd, unless its definition changed
// generation; false when the id is taken (draw another).
func (st store) createBackfill(ctx context.Context, sd stored, rec *bfRecord) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	key := st.backfillPrefix(sd.key) + rec.ID
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.Compare(clientv3.CreateRevision(sd.key), "=", sd.rev)).
		Then(clientv3.OpPut(key, string(b))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("schedule %s: create backfill: %w", sd.def.Name, err)
	}
	return resp.Succeeded, nil
}

// backfillsOf reads the backfills of the definition at defKey ("": every
// schedule's), oldest first.
func (st store) backfillsOf(ctx context.Context, defKey string) ([]bfStored, error) {
	pfx := st.prefix + "schedule-backfill/"
	if defKey != "" {
		pfx = st.backfillPrefix(defKey)
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Get(cctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("schedules: read backfills: %w", err)
	}
	out := make([]bfStored, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec bfRecord
		if json.Unmarshal(kv.Value, &rec) == nil {
			out = append(out, bfStored{rec: &rec, key: string(kv.Key), rev: kv.CreateRevision, modRev: kv.ModRevision})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out, nil
}

// putBackfill writes a backfill's progress, only while l leads the
// federation and only while the record is as bs read it: errGone when it
// was deleted or changed (cancelled) meanwhile. It moves bs.modRev to the
// write's.
func (st store) putBackfill(ctx context.Context, l *lease.Leadership, bs *bfStored) error {
	b, err := json.Marshal(bs.rec)
	if err != nil {
		return err
	}
	cctx, cancel := st.call(ctx)
	defer cancel()
	resp, err := st.c.Txn(cctx).
		If(l.Cmp()).
		Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(bs.key), "=", bs.rev), clientv3.Compare(clientv3.ModRevision(bs.key), "=", bs.modRev)},
			[]clientv3.Op{clientv3.OpPut(bs.key, string(b))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("schedule backfill %s: record: %w", bs.key, err)
	}
	if !resp.Succeeded {
		return errNotLeader
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner == nil || !inner.Succeeded {
		return errGone
	}
	bs.modRev = resp.Header.Revision
	return nil
}

// cancelBackfill moves the backfill id of the definition at defKey to
// CANCELED (by by, at now) unless it ended already, and returns it as it
// is then; found is false when there is none.
func (st store) cancelBackfill(ctx context.Context, defKey string, defRev int64, id, by string, now time.Time) (rec *bfRecord, found bool, err error) {
	key := st.backfillPrefix(defKey) + id
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
		var r bfRecord
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
