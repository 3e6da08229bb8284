package maint

import (
	"slices"
	"testing"

	"github.com/ax-sched/ax/queue"
)

func TestFollowWork(t *testing.T) {
	w := func(running, parked int) queue.SharePart { return queue.SharePart{Running: running, Parked: parked} }
	for _, c := range []struct {
		name string
		l    queue.Limit
		sh   []queue.SharePart
		turn int
		want []queue.SharePart
	}{
		{"no work: shared as if everywhere", queue.Limit{Rate: 50, Burst: 5, Concurrency: 5}, make([]queue.SharePart, 3), 0,
			[]queue.SharePart{{Rate: 16667, Burst: 2, Conc: 2}, {Rate: 16667, Burst: 2, Conc: 2}, {Rate: 16666, Burst: 1, Conc: 1}}},
		{"all on shard 1", queue.Limit{Rate: 50, Burst: 5, Concurrency: 5}, []queue.SharePart{{}, w(0, 9), {}}, 0,
			[]queue.SharePart{{}, {Rate: 50000, Burst: 5, Conc: 5}, {}}},
		{"in proportion", queue.Limit{Concurrency: 10}, []queue.SharePart{w(2, 0), w(1, 7), {}}, 0,
			[]queue.SharePart{{Conc: 3}, {Conc: 7}, {}}},
		{"burst 1: one shard, turn by turn", queue.Limit{Rate: 1, Burst: 1}, []queue.SharePart{w(0, 1), w(0, 1), w(0, 1)}, 2,
			[]queue.SharePart{{}, {}, {Rate: 1000, Burst: 1}}},
		{"below the shards: those running first", queue.Limit{Concurrency: 1}, []queue.SharePart{w(0, 3), w(1, 0), w(0, 3)}, 0,
			[]queue.SharePart{{}, {Conc: 1}, {}}},
		{"a tiny rate is one shard's", queue.Limit{Rate: 0.001}, make([]queue.SharePart, 3), 1,
			[]queue.SharePart{{Rate: 1, Burst: 1}, {}, {}}},
		{"no work: the parts stay", queue.Limit{Concurrency: 2}, []queue.SharePart{{Conc: 0}, {Conc: 0}, {Conc: 2}}, 0,
			[]queue.SharePart{{}, {}, {Conc: 2}}},
	} {
		if got := followWork(c.l, c.sh, c.turn); !slices.Equal(got, c.want) {
			t.Errorf("%s: followWork = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestLimitPart(t *testing.T) {
	for v, want := range map[string]int{"1000 1 2": 2, "1000 1 1 z": 0, "0 0 0": 0, "": 0, "5 5": 0} {
		if got := queue.MovedPart(v); got != want {
			t.Errorf("movedPart(%q) = %d, want %d", v, got, want)
		}
	}
	for _, c := range []struct {
		l    queue.Limit
		p    queue.SharePart
		want string
	}{
		{queue.Limit{Rate: 2, Concurrency: 3}, queue.SharePart{Rate: 1000, Burst: 1, Conc: 0}, "1000 1 1 z"},
		{queue.Limit{Rate: 2, Concurrency: 3}, queue.SharePart{Conc: 2}, "1 0 2"},
		{queue.Limit{Concurrency: 3}, queue.SharePart{Conc: 3}, "0 1 3"},
		{queue.Limit{Rate: 2}, queue.SharePart{Rate: 2000, Burst: 2}, "2000 2 0"},
	} {
		got := limitPart(c.l, c.p)
		if got != c.want {
			t.Errorf("limitPart(%+v, %+v) = %q, want %q", c.l, c.p, got, c.want)
		}
		if back := queue.ParsePart(got); back != c.p {
			t.Errorf("parsePart(%q) = %+v, want %+v", got, back, c.p)
		}
	}
}
