package dag

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// A gated node is never a root; it is released once every upstream run
// succeeded, cancelled when one failed, settled by its gate past the
// deadline, and a stale gate settles it before its upstream nodes end.
func TestGates(t *testing.T) {
	now := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	up := task.Gate{Schedule: "up", Rule: task.GateSamePeriod, RunID: "u1", DAG: true, Deadline: now.Add(time.Minute)}
	late := up
	late.Deadline, late.OnTimeout = now.Add(-time.Second), task.GateSkip
	if isRoot(&queue.DAGNodeDef{ID: "a", Gates: []task.Gate{up}}) || !isRoot(&queue.DAGNodeDef{ID: "a"}) {
		t.Error("isRoot: a gated node is not a root, a node without upstream is")
	}
	for _, c := range []struct {
		name   string
		gates  []task.Gate
		u1     upstream
		want   task.NodeState
		reason string
	}{
		{"upstream running", []task.Gate{up}, upstreamPending, "", ""},
		{"upstream unread", []task.Gate{up}, upstreamUnread, "", ""},
		{"upstream succeeded", []task.Gate{up}, upstreamSuccess, task.NodeReleased, ""},
		{"upstream failed", []task.Gate{up}, upstreamFailed, task.NodeCanceled, task.ReasonUpstreamFailed},
		{"past the deadline, skip", []task.Gate{late}, upstreamPending, task.NodeSkipped, task.ReasonUpstreamTimeout},
		{"succeeded past the deadline", []task.Gate{late}, upstreamSuccess, task.NodeReleased, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &runPass{now: now, upstreams: map[string]upstream{"u1": c.u1}}
			got, reason := p.gate(&queue.DAGNodeDef{ID: "n", Gates: c.gates})
			if got != c.want || reason != c.reason {
				t.Errorf("gate: %q %q, want %q %q", got, reason, c.want, c.reason)
			}
		})
	}

	stale := task.Gate{Schedule: "up", Rule: task.GateLatestSuccess, Stale: true}
	def := &queue.DAGDef{Nodes: []queue.DAGNodeDef{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}, Gates: []task.Gate{stale}}, {ID: "c", DependsOn: []string{"b"}}}}
	run := &queue.DAGRun{Nodes: map[string]queue.DAGNode{"a": {State: task.NodeReleased}, "b": {State: task.NodeWaiting}, "c": {State: task.NodeWaiting}}}
	p := newRunPass("r", run, &runPlan{def: def, order: []int{0, 1, 2}})
	p.now = now
	p.settleStale()
	p.settleWaiting()
	if p.states["b"] != task.NodeFailed || p.states["c"] != task.NodeCanceled || p.states["a"] != task.NodeReleased {
		t.Errorf("stale gate: states %v, want b FAILED at once, c CANCELED, a still RELEASED", p.states)
	}
	if len(p.gatedRuns()) != 0 {
		t.Error("a stale gate has no run to read")
	}
}

// fakeReruns answers Reruns with one rerun of every period.
type fakeReruns struct{ Upstreams }

func (fakeReruns) Reruns(context.Context, string, string, time.Time) ([]string, error) {
	return []string{"rerun"}, nil
}

// A same_period gate counts the period's reruns; an exact one (a
// downstream rerun's) only the run it names.
func TestGatePeriodRuns(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	r := &Runs{ups: fakeReruns{}}
	g := task.Gate{Schedule: "up", Rule: task.GateSamePeriod, RunID: "first", Period: &at}
	exact := g
	exact.Exact, exact.RunID = true, "rerun-2"
	for _, c := range []struct {
		g    task.Gate
		want []string
	}{{g, []string{"first", "rerun"}}, {exact, []string{"rerun-2"}}} {
		got, err := r.periodRuns(context.Background(), "t", c.g)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("periodRuns(exact %v): %v %v, want %v", c.g.Exact, got, err, c.want)
		}
	}
}
