package costsim

import (
	"reflect"
	"testing"
	"time"
)

// tiny is a 20-minute scenario on three of the day's pools: a cheap-per-hour pool four times
// slower per task and two on-demand pools in two regions, two task types, constant prices.
func tiny(t *testing.T) *Scenario {
	t.Helper()
	day, err := Day()
	if err != nil {
		t.Fatal(err)
	}
	s := *day
	s.Name, s.Length, s.Drain = "tiny", 20*time.Minute, 3*time.Hour
	s.Pools = nil
	for _, p := range day.Pools {
		switch p.Region + "/" + p.Name {
		case "us-east-1/cpu-spot", "us-east-1/cpu", "us-central1/cpu":
			p.Slots = 16
			s.Pools = append(s.Pools, p)
		}
	}
	cpu := map[string]string{"class": "cpu"}
	s.Types = []TypeSpec{
		{Name: "etl", Tags: cpu, Mean: 40 * time.Second, Sigma: 0.3, Peak: 0.4, Rate: func(time.Duration) float64 { return 0.4 }},
		{Name: "thumb", Tags: cpu, Mean: 5 * time.Second, Sigma: 0.3, Peak: 0.5, Rate: func(time.Duration) float64 { return 0.5 }},
	}
	s.Failures, s.Prices = nil, nil
	return &s
}

// A seed replays the same day: every figure of every policy, series included.
func TestDeterministic(t *testing.T) {
	s := tiny(t)
	a, err := Run(s, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(s, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed 7 differ:\n%+v\n%+v", a, b)
	}
	c, err := Run(s, 8, []string{PolicyAx})
	if err != nil {
		t.Fatal(err)
	}
	if c[0].Cost == a[0].Cost {
		t.Fatalf("seeds 7 and 8 cost the same (%v): the seed is not used", c[0].Cost)
	}
	for _, r := range a {
		if r.Done != r.Tasks || r.Tasks < 900 {
			t.Fatalf("%s: %d of %d tasks done", r.Policy, r.Done, r.Tasks)
		}
	}
}

// Without a wait target and with constant prices, greedy hindsight gives every task its
// cheapest pool (price × true duration): no policy can cost less.
func TestHindsightIsCheapest(t *testing.T) {
	s := tiny(t)
	s.MaxWait = 0
	res, err := Run(s, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := res[len(res)-1]
	if h.Policy != PolicyHindsight {
		t.Fatalf("last result is %s", h.Policy)
	}
	for _, r := range res {
		if r.Cost < h.Cost-1e-9 {
			t.Errorf("%s costs %.6f < hindsight %.6f", r.Policy, r.Cost, h.Cost)
		}
	}
}

// With a wait target the queue of the slow pool the list price favours spills to the others,
// whose completions teach ax that they run 4× faster: the slow pool stops winning.
func TestAxLearnsTheSlowPool(t *testing.T) {
	s := tiny(t)
	res, err := Run(s, 3, []string{PolicyAx, PolicyCheapest, PolicyHindsight})
	if err != nil {
		t.Fatal(err)
	}
	ax, list, h := res[0], res[1], res[2]
	for _, r := range res {
		t.Logf("%-20s $%.4f p99 %v %v", r.Policy, r.Cost, r.WaitP99, r.ByPool)
	}
	if slow := ax.ByPool["us-east-1/cpu-spot"]; slow*4 > ax.Done {
		t.Errorf("ax ran %d of %d tasks on the 4× slower pool", slow, ax.Done)
	}
	if ax.Cost > 1.2*h.Cost || ax.Cost > 0.8*list.Cost {
		t.Errorf("ax costs %.4f: hindsight %.4f, list price %.4f", ax.Cost, h.Cost, list.Cost)
	}
}

// A region that fails takes placements only inside the stale window; after it, none.
func TestNoPlacementOnDeadRegionAfterStaleWindow(t *testing.T) {
	s := tiny(t)
	s.Failures = []Failure{{Region: "us-east-1", From: 5 * time.Minute, To: 15 * time.Minute}}
	res, err := Run(s, 3, []string{PolicyAx, PolicyHindsight})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.OnDeadAfterStale != 0 || r.OnDead != r.Replaced || r.Done != r.Tasks {
			t.Errorf("%s: %d placed on the dead region after the stale window, %d on it, %d replaced, %d/%d done",
				r.Policy, r.OnDeadAfterStale, r.OnDead, r.Replaced, r.Done, r.Tasks)
		}
	}
	if res[0].OnDead == 0 {
		t.Errorf("ax placed nothing on us-east-1 inside its stale window: the window is not exercised")
	}
	if res[1].OnDead != 0 {
		t.Errorf("hindsight, which knows, placed %d on the dead region", res[1].OnDead)
	}
}
