package store_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
)

// RecentStarts reads the ready→start waits of the tasks that claims after
// the given stream ids named, in every shard, and resumes where it
// stopped: a claim is sampled once; a submit is not a start.
func TestRecentStartsSamplesClaimsOnce(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	_, after, err := e.s.RecentStarts(e.ctx, nil, 100) // from now on
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.submit("cpu")
	}
	e.submit("gpu")
	e.clock.Advance(3 * time.Second)
	if ts := e.claim("cpu", 10); len(ts) != 4 {
		t.Fatalf("claimed %d cpu tasks, want 4", len(ts))
	}
	starts, after, err := e.s.RecentStarts(e.ctx, after, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(starts) != 4 {
		t.Fatalf("sampled %d starts, want the 4 claimed: %+v", len(starts), starts)
	}
	for _, s := range starts {
		if s.Pool != "cpu" || s.Wait != 3*time.Second {
			t.Fatalf("start %+v, want pool cpu waited 3s", s)
		}
	}
	e.clock.Advance(time.Second)
	e.claimOne("gpu")
	starts, _, err = e.s.RecentStarts(e.ctx, after, 100)
	if err != nil || len(starts) != 1 || starts[0].Pool != "gpu" || starts[0].Wait != 4*time.Second {
		t.Fatalf("after the gpu claim: %+v %v, want one gpu start of 4s", starts, err)
	}
}
