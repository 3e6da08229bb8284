package peers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fake tool stands in for `ax bench throughput`: the harness runs it per
// round, reads its JSON and reports every run and the medians. (The real
// tools need Redis, PostgreSQL, node and the network: they are benchmarks,
// run by hand, not tests.)
func TestPeersReadsEveryRoundOfEachTool(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	// Each call prints a summary whose drain rate is 1000 × its call number.
	script := `#!/bin/sh
n=$(cat ` + counter + ` 2>/dev/null || echo 0); n=$((n+1)); echo $n > ` + counter + `
echo '{"phases":[{"name":"submit-single","tasks_per_s":500},{"name":"drain","tasks_per_s":'$((n*1000))',"redis_cpu_us_per_task":40,"ax_cpu_us_per_task":20},{"name":"submit+drain","tasks_per_s":700}]}'
`
	exe := filepath.Join(dir, "ax")
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Run(context.Background(), Options{Exe: exe, Dir: dir, Tools: []string{"ax"}, Rounds: 3, N: 10, RawDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tables) != 2 || len(s.Tables[0].Rows) != 3 || len(s.Tables[1].Rows) != 1 {
		t.Fatalf("tables: %+v", s.Tables)
	}
	for i, row := range s.Tables[0].Rows {
		if want := []string{"1000", "2000", "3000"}[i]; row[4] != want {
			t.Errorf("round %d drain %q, want %q (row %v)", i+1, row[4], want, row)
		}
	}
	if med := s.Tables[1].Rows[0]; !strings.HasPrefix(med[1], "2000 (1000 – 3000)") || !strings.HasPrefix(med[4], "60.0") {
		t.Errorf("medians row %v: want drain 2000 (1000 – 3000), CPU 60.0", med)
	}
	if _, err := os.Stat(filepath.Join(dir, "2-ax.json")); err != nil {
		t.Errorf("raw JSON of round 2: %v", err)
	}
}

func TestPeersRefusesAnUnknownTool(t *testing.T) {
	_, err := Run(context.Background(), Options{Exe: "ax", Dir: t.TempDir(), Tools: []string{"sidekiq"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `"sidekiq"`) {
		t.Fatalf("err = %v, want the unknown tool named", err)
	}
}

func TestPeerPhaseReadsAsynqEnqueueAsSubmitSingle(t *testing.T) {
	r := &peerRun{Phases: []peerPhase{{Name: "enqueue", PerS: 9, Redis: 1, Proc: 2}}}
	if f, ok := r.phase("submit-single"); !ok || f.rate != 9 || f.backend != 1 || f.proc != 2 {
		t.Fatalf("submit-single = %+v, %v", f, ok)
	}
	if _, ok := r.phase("drain"); ok {
		t.Fatal("a phase the tool does not have was found")
	}
}

// With a list of policies each tool runs once per policy in every round,
// and the policy's cost is the same round's ratio to the run without it.
func TestPeersRunsEachPolicyInTheSameRound(t *testing.T) {
	dir := t.TempDir()
	// Drains 1000/s without an AOF, 800/s with one (its argv says which).
	script := `#!/bin/sh
rate=1000; case "$*" in *"--aof everysec"*) rate=800;; esac
echo '{"phases":[{"name":"drain","tasks_per_s":'$rate',"redis_cpu_us_per_task":40},{"name":"submit+drain","tasks_per_s":700}]}'
`
	exe := filepath.Join(dir, "ax")
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Run(context.Background(), Options{Exe: exe, Dir: dir, Tools: []string{"ax"}, Rounds: 2, N: 10, AOF: "none,everysec"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, row := range s.Tables[0].Rows {
		names = append(names, row[0]+":"+row[1]+":"+row[4])
	}
	if got, want := strings.Join(names, " "), "1:ax:1000 1:ax@everysec:800 2:ax:1000 2:ax@everysec:800"; got != want {
		t.Fatalf("runs %q, want %q", got, want)
	}
	if len(s.Tables) != 3 || len(s.Tables[2].Rows) != 1 {
		t.Fatalf("want a third table with one row (ax@everysec ÷ ax): %+v", s.Tables)
	}
	if row := s.Tables[2].Rows[0]; row[0] != "ax@everysec ÷ ax" || !strings.HasPrefix(row[1], "0.80×") || !strings.HasPrefix(row[2], "1.00×") {
		t.Errorf("policy cost row %v: want drain 0.80×, submit+drain 1.00×", row)
	}
	if _, err := Run(context.Background(), Options{Exe: exe, Dir: dir, Tools: []string{"ax"}, AOF: "none,sometimes"}, nil); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("an unknown policy: err = %v, want it named", err)
	}
}
