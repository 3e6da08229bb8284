package store_test

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestIndexOldDAGRuns: runs written before the index of every run existed
// (a run hash, no index entry) are not listed until IndexOldDAGRuns adds
// them — on a cluster from every master, since each run has its own slot —
// after which the listing holds every run, newest first. Repeating it adds
// nothing: at once once the region is marked indexed, and by ZADD NX when
// the mark is gone (a scan cut short).
func TestIndexOldDAGRuns(t *testing.T) {
	e := newEnv(t)
	var ids, old []string
	for i := range 6 {
		def := e.dagDef("a")
		if err := e.s.CreateDAG(e.ctx, def, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, def.ID)
		if i%3 != 2 { // the old layout: no index entry
			old = append(old, def.ID)
		}
	}
	if err := e.rdb.ZRem(e.ctx, e.s.AllDAGs(), anys(old)...).Err(); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		runs, more, err := e.s.DAGRunsBefore(e.ctx, 0, "", 100)
		if err != nil || more {
			t.Fatalf("list: %v (more %v)", err, more)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := listed(); len(got) != 2 {
		t.Fatalf("before the backfill: %v, want the 2 indexed runs", got)
	}
	n, err := e.s.IndexOldDAGRuns(e.ctx, 1) // one key per SCAN call: many batches
	if err != nil || n != len(old) {
		t.Fatalf("backfill: %d, %v; want %d added", n, err, len(old))
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if got := listed(); !slices.Equal(got, want) {
		t.Fatalf("after the backfill: %v, want %v (newest first)", got, want)
	}
	if n, err := e.s.IndexOldDAGRuns(e.ctx, 100); err != nil || n != 0 {
		t.Fatalf("second backfill: %d, %v; want 0 (marked indexed)", n, err)
	}
	if err := e.rdb.Del(e.ctx, e.s.DagsIndexed()).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.IndexOldDAGRuns(e.ctx, 100); err != nil || n != 0 {
		t.Fatalf("backfill without the mark: %d, %v; want 0 (idempotent)", n, err)
	}
	if got := listed(); !slices.Equal(got, want) {
		t.Fatalf("after the repeats: %v, want %v", got, want)
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestListingRacingACreation: a listing that meets a run whose hashes are
// not written yet (CreateDAG indexes it, with the active set, first) keeps
// it in the index, so it is listed once created; a run that expired (no
// hash, not active) leaves the index.
func TestListingRacingACreation(t *testing.T) {
	e := newEnv(t)
	creating, expired := e.dagDef("a"), e.dagDef("a")
	for _, id := range []string{creating.ID, expired.ID} {
		if err := e.rdb.ZAdd(e.ctx, e.s.AllDAGs(), redis.Z{Score: 1e12, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.rdb.ZAdd(e.ctx, e.s.Options().Prefix+":{dags}:active", redis.Z{Score: 1e12, Member: creating.ID}).Err(); err != nil {
		t.Fatal(err)
	}
	if runs, _, err := e.s.DAGRunsBefore(e.ctx, 0, "", 100); err != nil || len(runs) != 0 {
		t.Fatalf("list: %v %v, want no run yet", runs, err)
	}
	left, err := e.rdb.ZRange(e.ctx, e.s.AllDAGs(), 0, -1).Result()
	if err != nil || !slices.Equal(left, []string{creating.ID}) {
		t.Fatalf("index after the listing: %v %v, want only the run being created", left, err)
	}
}
