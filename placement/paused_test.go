package placement

import "testing"

// A pool whose low priorities backpressure has paused (fill reached the
// pause threshold and has not yet fallen under the resume one) admits no
// priority 3–4 task unless it is critical: such a task goes to the next
// pool, and when every candidate is paused or saturated the answer is
// "all saturated" (the API's 429). Higher priorities are unaffected.
func TestPausedPoolHoldsLowPriorities(t *testing.T) {
	cheap := cpuPool(t, "aws", "us-east-1", "m6i.xlarge") // 0.048
	dear := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")  // 0.0535
	cheap.Paused = true
	p := mustPlacer(t, DefaultConfig(), nil)
	s := mustSnapshot(t, cheap, dear)
	task := func(prio int, critical bool) Task {
		tk := cpuTask()
		tk.Priority, tk.Critical = prio, critical
		return tk
	}
	for _, c := range []struct {
		name string
		task Task
		want string
	}{
		{"priority 2 ignores the pause", task(2, false), cheap.Key()},
		{"priority 3 goes elsewhere", task(3, false), dear.Key()},
		{"priority 4 goes elsewhere", task(4, false), dear.Key()},
		{"a critical priority 4 is admitted", task(4, true), cheap.Key()},
	} {
		if got := key(p.Place(s, c.task, t0)); got != c.want {
			t.Errorf("%s: placed in %s, want %s", c.name, got, c.want)
		}
		exp := p.Explain(s, c.task, t0)
		if got := key(exp.Decision); got != c.want {
			t.Errorf("%s: explain chose %s, want %s", c.name, got, c.want)
		}
	}
	exp := p.Explain(s, task(4, false), t0)
	if r := exp.Candidates[0].Reason; r != "SATURATED" {
		t.Errorf("explain: the paused pool's reason is %q, want SATURATED", r)
	}

	// Every candidate paused: low priorities are refused as saturated.
	dear.Paused = true
	s = mustSnapshot(t, cheap, dear)
	d := p.Place(s, task(3, false), t0)
	if d.OK || !d.AllSaturated() {
		t.Fatalf("all paused: %+v, want all saturated", d)
	}
	if d := p.Place(s, task(1, false), t0); !d.OK {
		t.Fatalf("priority 1 with every pool paused: %v", d.Err())
	}
}
