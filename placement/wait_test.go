package placement

import (
	"strings"
	"testing"
	"time"
)

// TestExpectedWait: an 8-slot cheap pool with a long queue and an idle 16-slot
// pool that costs a little more. Judged by fill alone (480 of 10 000 queued) the cheap pool keeps
// winning; judged by the time its queue takes to reach a new task it loses once that passes the
// target.
func TestExpectedWait(t *testing.T) {
	cheap := with(cpuPool(t, "aws", "us-east-1", "m6i.xlarge"), func(p *Pool) { // 0.0480
		p.Slots, p.Running, p.Ready, p.QueueCapacity = 8, 8, 480, 10_000
	})
	idle := with(cpuPool(t, "gcp", "us-central1", "n2-standard-4"), func(p *Pool) { // 0.04856
		p.Slots, p.Running, p.Ready, p.QueueCapacity = 16, 0, 0, 10_000
	})
	// 30 s tasks everywhere: 8 slots drain 0.27 tasks/s, 481 ÷ 0.27 = 1804 s.
	learn := func(e *Estimator) {
		e.Set("", "etl", cheap.Key(), Estimate{Mean: 30 * time.Second, Count: 100})
		e.Set("", "etl", idle.Key(), Estimate{Mean: 30 * time.Second, Count: 100})
	}
	tests := []struct {
		name     string
		cheap    func(*Pool)
		cfgWait  time.Duration
		taskWait time.Duration
		want     string
		rule     Rule
		source   WaitSource
		wait     time.Duration
		over     bool
	}{
		{name: "no target: cheapest", want: cheap.Key(), rule: RuleCheapest, source: WaitSlots, wait: 1804 * time.Second},
		{name: "config target: idle pool", cfgWait: time.Minute, want: idle.Key(), rule: RuleCheapestWithinWait},
		{name: "generous target: cheapest", cfgWait: time.Hour, want: cheap.Key(), rule: RuleCheapestWithinWait,
			source: WaitSlots, wait: 1804 * time.Second},
		{name: "pool target", cheap: func(p *Pool) { p.MaxWait = time.Minute }, want: idle.Key(), rule: RuleCheapestWithinWait},
		{name: "pool target replaces config", cfgWait: time.Minute, cheap: func(p *Pool) { p.MaxWait = time.Hour },
			want: cheap.Key(), rule: RuleCheapestWithinWait, source: WaitSlots, wait: 1804 * time.Second},
		{name: "task target tighter than config", cfgWait: time.Hour, taskWait: time.Minute, want: idle.Key(),
			rule: RuleCheapestWithinWait},
		{name: "measured drain rate", cfgWait: time.Hour, cheap: func(p *Pool) { p.DrainRate = 0.1 }, want: idle.Key(),
			rule: RuleCheapestWithinWait}, // 481 ÷ 0.1 = 4810 s > 1 h
		{name: "free slot waits for nothing", cfgWait: time.Second, cheap: func(p *Pool) { p.Ready, p.Running = 0, 7 },
			want: cheap.Key(), rule: RuleCheapestWithinWait, source: WaitFreeSlot},
		// 28 tasks of slots 0.25 hold 7 of the 8 slots: one is free.
		{name: "quarter tasks leave a slot free", cfgWait: time.Second,
			cheap: func(p *Pool) { p.Ready, p.Running, p.RunningSlots = 0, 28, 7 },
			want:  cheap.Key(), rule: RuleCheapestWithinWait, source: WaitFreeSlot},
		{name: "quarter tasks filling every slot", cheap: func(p *Pool) { p.Running, p.RunningSlots = 32, 8 },
			want: cheap.Key(), rule: RuleCheapest, source: WaitSlots, wait: 1804 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cheap
			if tc.cheap != nil {
				c = with(cheap, tc.cheap)
			}
			cfg := DefaultConfig()
			cfg.MaxWait = tc.cfgWait
			est := mustEstimator(t, cfg)
			learn(est)
			p := mustPlacer(t, cfg, est)
			s := mustSnapshot(t, c, idle)
			task := cpuTask()
			task.MaxWait = tc.taskWait
			exp := p.Explain(s, task, t0)
			d := p.Place(s, task, t0)
			if key(d) != tc.want || key(exp.Decision) != tc.want || exp.Rule != tc.rule || d.OverTarget != tc.over {
				t.Fatalf("placed %s, explain %s rule %s over %v; want %s rule %s over %v",
					key(d), key(exp.Decision), exp.Rule, d.OverTarget, tc.want, tc.rule, tc.over)
			}
			if tc.want == cheap.Key() {
				cc := exp.Candidates[0]
				if cc.WaitSource != tc.source || (cc.Wait-tc.wait).Abs() > time.Second || d.Wait != cc.Wait {
					t.Fatalf("cheap pool wait %v (%s), decision %v; want %v (%s)", cc.Wait, cc.WaitSource, d.Wait, tc.wait, tc.source)
				}
			}
		})
	}
}

// TestLeastWaitWhenAllPastTarget: when every pool's wait is past its target, the least-wait one
// wins, whatever it costs, and the decision says the target is missed.
func TestLeastWaitWhenAllPastTarget(t *testing.T) {
	mk := func(instance string, provider, region string, ready int, rate float64) Pool {
		return with(cpuPool(t, provider, region, instance), func(p *Pool) {
			p.Slots, p.Running, p.Ready, p.DrainRate = 8, 8, ready, rate
		})
	}
	cheap := mk("m6i.xlarge", "aws", "us-east-1", 400, 1)      // 401 s
	mid := mk("n2-standard-4", "gcp", "us-central1", 100, 1)   // 101 s
	dear := mk("m6i.xlarge", "aws", "ap-northeast-1", 300, 10) // 30.1 s
	dearer := mk("m6i.xlarge", "aws", "eu-west-1", 400, 10)    // 40.1 s
	cfg := DefaultConfig()
	cfg.MaxWait = 10 * time.Second
	p := mustPlacer(t, cfg, nil)
	s := mustSnapshot(t, cheap, mid, dear, dearer)
	exp := p.Explain(s, cpuTask(), t0)
	d := p.Place(s, cpuTask(), t0)
	if key(d) != dear.Key() || !d.OverTarget || exp.Rule != RuleLeastWait || d != exp.Decision {
		t.Fatalf("placed %s over %v rule %s; want %s, over, %s", key(d), d.OverTarget, exp.Rule, dear.Key(), RuleLeastWait)
	}
	for _, c := range exp.Candidates {
		if !c.OverTarget || c.WaitTarget != cfg.MaxWait || c.WaitSource != WaitMeasured {
			t.Fatalf("%s/%s: over %v target %v source %s", c.Region, c.Pool, c.OverTarget, c.WaitTarget, c.WaitSource)
		}
		if !strings.Contains(c.Detail, "measured drain) > max_wait 10s") {
			t.Fatalf("%s/%s: detail %q", c.Region, c.Pool, c.Detail)
		}
	}
	// Damping counts this server's placements as tasks ahead: the burst moves on once the least
	// wait pool's grows past the next one's.
	seen := map[string]int{}
	for range 200 {
		seen[key(p.Place(s, cpuTask(), t0))]++
	}
	if seen[dearer.Key()] == 0 || seen[dear.Key()] == 0 {
		t.Fatalf("a burst of least-wait placements: %v; want both fast pools used", seen)
	}
}

func TestWaitConfigValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWait = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative max_wait accepted")
	}
	for _, bad := range []func(*Pool){
		func(p *Pool) { p.DrainRate = -1 },
		func(p *Pool) { p.MaxWait = -time.Second },
	} {
		if _, err := NewSnapshot(DefaultConfig(), []Pool{with(cpuPool(t, "aws", "us-east-1", "m6i.xlarge"), bad)}); err == nil {
			t.Fatal("bad pool accepted")
		}
	}
}
