package region

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// fakePreemptStore serves one pool's heads and running tasks and records
// the preemptions asked for.
type fakePreemptStore struct {
	heads   []queue.WaitingHead
	running []queue.RunningTask
	asked   []string
}

func (f *fakePreemptStore) Heads(context.Context, string) ([]queue.WaitingHead, error) {
	return f.heads, nil
}
func (f *fakePreemptStore) Running(context.Context, string) ([]queue.RunningTask, error) {
	return slices.Clone(f.running), nil
}
func (f *fakePreemptStore) RequestPreemption(_ context.Context, _ queue.Fence, id, _, _ string) (bool, string, error) {
	f.asked = append(f.asked, id)
	return true, "", nil
}

var _ preemptStore = (*fakePreemptStore)(nil)

// Preemption counts slot units: an urgent task of a whole slot has the
// slot it asks for freed, eight eighths on one worker (not one eighth, which
// frees no room it fits in); none when no one worker's preemptible tasks
// hold a slot; nothing when it fits in the room free already.
func TestPreemptionFreesTheSlotsAsked(t *testing.T) {
	now := time.Now()
	run := func(worker string, n, milli, prio int) []queue.RunningTask {
		var out []queue.RunningTask
		for i := range n {
			out = append(out, queue.RunningTask{ID: fmt.Sprintf("%s-%d", worker, i), Worker: worker, Priority: prio, Slots: milli,
				Preemptible: true, StartedAt: now.Add(-time.Duration(i+1) * time.Second)})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		urgent  int // milli-slots
		free    int
		running []queue.RunningTask
		want    []string
	}{
		{"eight eighths on one worker", 1000, 0, append(run("w1", 8, 125, 4), run("w2", 1, 1000, 3)...),
			[]string{"w1-0", "w1-1", "w1-2", "w1-3", "w1-4", "w1-5", "w1-6", "w1-7"}},
		{"two eighths are not a slot: the whole task of w2", 1000, 0, append(run("w1", 2, 125, 4), run("w2", 1, 1000, 3)...),
			[]string{"w2-0"}},
		{"a slot in eighths over two workers: none", 1000, 0, append(run("w1", 4, 125, 4), run("w2", 4, 125, 4)...), nil},
		{"a quarter task needs two eighths", 250, 0, run("w1", 8, 125, 4), []string{"w1-0", "w1-1"}},
		{"it fits the free room already", 250, 500, run("w1", 8, 125, 4), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakePreemptStore{running: c.running,
				heads: []queue.WaitingHead{{ID: "urgent", Priority: 0, Slots: c.urgent, EnqueuedAt: now.Add(-time.Minute)}}}
			s := newPreempter(Preemption{MaxPerWorkerPerMinute: 100}, &term{region: "r", log: slog.Default()}, st,
				NewMetrics(prometheus.NewRegistry()), nil)
			if err := s.preemptPool(context.Background(), "p", c.free); err != nil {
				t.Fatal(err)
			}
			slices.Sort(st.asked)
			if !slices.Equal(st.asked, c.want) {
				t.Fatalf("preempted %v, want %v", st.asked, c.want)
			}
		})
	}
}
