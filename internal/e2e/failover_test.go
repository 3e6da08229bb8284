package e2e

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

func sleepMS(ms int) func(*task.Spec) {
	return func(s *task.Spec) {
		s.Type = "sleep"
		s.Payload, _ = json.Marshal(map[string]int{"ms": ms})
	}
}

func delayed(d time.Duration) func(*task.Spec) {
	return func(s *task.Spec) { s.Delay = task.Duration(d) }
}

func (c *cluster) state(id string) task.State {
	t, err := c.store.Get(context.Background(), id)
	if err != nil {
		c.t.Fatalf("task %s: %v", id, err)
	}
	return t.State
}

// SIGKILL the leader: the standby leads within 2× the session TTL and
// delayed tasks keep being promoted.
func TestLeaderKilledStandbyTakesOver(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	a := c.start("server-a", "server")
	c.waitReady(a)
	leader, _ := c.waitLeader(20*time.Second, 0)
	if leader != a.pid() {
		t.Fatalf("leader pid %d, want a (%d)", leader, a.pid())
	}
	b := c.start("server-b", "server")
	c.waitReady(b)
	early := c.submit(20, delayed(300*time.Millisecond))
	waitUntil(t, 5*time.Second, "promotion by a", func() bool { return c.counts().Ready == 20 })
	late := c.submit(20, delayed(1500*time.Millisecond)) // due while nobody leads
	a.kill()
	pid, took := c.waitLeader(2*c.ttl+time.Second, a.pid())
	t.Logf("takeover after SIGKILL of the leader: %v (session TTL %v)", took, c.ttl)
	if pid != b.pid() {
		t.Fatalf("new leader %d is not b (%d)", pid, b.pid())
	}
	if took > 2*c.ttl {
		t.Errorf("takeover took %v, more than 2× TTL (%v)", took, 2*c.ttl)
	}
	waitUntil(t, 5*time.Second, "promotion by b", func() bool { return c.counts().Ready == 40 })
	for _, id := range append(early, late...) {
		if st := c.state(id); st != task.Ready {
			t.Fatalf("task %s is %s", id, st)
		}
	}
}

// SIGSTOP the leader past its TTL: the standby takes over; after SIGCONT the
// old leader's leader-only writes are rejected by the fence (or it notices
// its lost session first) and it stops leading; nothing is promoted twice.
func TestPausedLeaderIsFenced(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	a := c.start("server-a", "server")
	c.waitReady(a)
	c.waitLeader(20*time.Second, 0)
	b := c.start("server-b", "server")
	c.waitReady(b)
	ids := c.submit(30, delayed(2*time.Second))
	ids = append(ids, c.submit(30, delayed(6*time.Second))...)
	a.signal(syscall.SIGSTOP)
	_, took := c.waitLeader(3*c.ttl+time.Second, a.pid())
	t.Logf("standby leads %v after SIGSTOP of the leader", took)
	time.Sleep(c.ttl) // the new leader raises the fence with its first writes
	a.signal(syscall.SIGCONT)
	waitUntil(t, 10*time.Second, "all 60 promoted", func() bool { return c.counts().Ready == 60 })
	time.Sleep(2 * time.Second) // give the old leader time to try
	if v := metric(t, a.api, "ax_region_leader"); v != 0 {
		t.Fatalf("the resumed old leader still reports leading (%v)", v)
	}
	if pid := c.leaderPID(context.Background()); pid != b.pid() {
		t.Fatalf("leader is %d, want b (%d)", pid, b.pid())
	}
	fenced := metric(t, a.api, "ax_fenced_writes_rejected_total")
	t.Logf("old leader after SIGCONT: fenced writes rejected = %v (0 means it saw its session lost before writing)", fenced)
	// Nothing promoted twice: each task became READY exactly once.
	for _, id := range ids {
		tr, err := c.store.Tasks().Trail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range tr {
			if x.To == task.Ready {
				n++
			}
		}
		if n != 1 || c.state(id) != task.Ready {
			t.Fatalf("task %s: %d transitions to READY, state %s: %+v", id, n, c.state(id), tr)
		}
	}
	if c.counts().Ready != 60 || c.counts().Pending != 0 {
		t.Fatalf("counts %+v", c.counts())
	}
}

// SIGKILL a worker holding 200 running tasks: all 200 finish on another
// worker within lease TTL + 2 s of the kill, each with exactly one SUCCESS.
func TestKilledWorkerTasksFinishElsewhere(t *testing.T) {
	c := newCluster(t, clusterOpts{lease: 3 * time.Second, heartbeat: time.Second})
	srv := c.start("server", "server")
	c.waitReady(srv)
	c.waitLeader(20*time.Second, 0)
	w1 := c.start("worker-1", "worker", "--pool", "cpu", "--id", "w1")
	ids := c.submit(200, sleepMS(800))
	waitUntil(t, 10*time.Second, "200 running on w1", func() bool { return c.counts().Running == 200 })
	w1.kill()
	killed := time.Now()
	c.start("worker-2", "worker", "--pool", "cpu", "--id", "w2")
	took := waitUntil(t, 20*time.Second, "200 SUCCESS", func() bool { return c.counts().Succeeded == 200 })
	t.Logf("all 200 finished %v after the kill (lease %v)", time.Since(killed), 3*time.Second)
	if took > 3*time.Second+2*time.Second {
		t.Errorf("recovery took %v, more than lease TTL + 2 s", took)
	}
	for _, id := range ids {
		tk, err := c.store.Get(context.Background(), id)
		if err != nil || tk.State != task.Success || tk.Worker != "w2" {
			t.Fatalf("task %s: %+v %v", id, tk, err)
		}
	}
	if cn := c.counts(); cn.Succeeded != 200 || cn.Running != 0 || cn.Ready != 0 || cn.Pending != 0 {
		t.Fatalf("counts %+v", cn)
	}
}

// 10 000 tasks through 2 servers and 3 workers while one worker and the
// leader are killed and restarted: exactly 10 000 SUCCESS, none lost.
func TestTenThousandTasksThroughKills(t *testing.T) {
	c := newCluster(t, clusterOpts{lease: 3 * time.Second, heartbeat: time.Second})
	a := c.start("server-a", "server")
	c.waitReady(a)
	c.waitLeader(20*time.Second, 0)
	b := c.start("server-b", "server")
	c.waitReady(b)
	w := []*proc{
		c.start("worker-1", "worker", "--pool", "cpu", "--id", "w1", "--concurrency", "20"),
		c.start("worker-2", "worker", "--pool", "cpu", "--id", "w2", "--concurrency", "20"),
		c.start("worker-3", "worker", "--pool", "cpu", "--id", "w3", "--concurrency", "20"),
	}
	ids := c.submit(10000, sleepMS(10))
	waitUntil(t, 30*time.Second, "work under way", func() bool { return c.counts().Succeeded > 1000 })
	w[0].kill()
	leader := c.leaderPID(context.Background())
	var dead *proc
	for _, p := range []*proc{a, b} {
		if p.pid() == leader {
			dead = p
		}
	}
	if dead == nil {
		t.Fatalf("leader pid %d is neither server", leader)
	}
	dead.kill()
	t.Logf("killed worker-1 and the leader (%s) at %d SUCCESS", dead.name, c.counts().Succeeded)
	time.Sleep(500 * time.Millisecond)
	c.start("worker-1b", "worker", "--pool", "cpu", "--id", "w1b", "--concurrency", "20")
	c.start(dead.name+"-restarted", "server")
	waitUntil(t, 90*time.Second, "10 000 SUCCESS", func() bool { return c.counts().Succeeded >= 10000 })
	time.Sleep(time.Second) // nothing more may arrive
	cn := c.counts()
	if cn.Succeeded != 10000 || cn.Running != 0 || cn.Ready != 0 || cn.Pending != 0 || cn.Dead != 0 {
		t.Fatalf("counts %+v", cn)
	}
	for _, id := range ids {
		if st := c.state(id); st != task.Success {
			t.Fatalf("task %s is %s", id, st)
		}
	}
}
