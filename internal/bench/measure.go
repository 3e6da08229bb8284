package bench

import (
	"context"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// redisCPU is the CPU time the Redis servers have used so far (INFO cpu:
// used_cpu_sys + used_cpu_user, main thread and background threads; every
// master's, summed).
func (e *Env) redisCPU(ctx context.Context) time.Duration {
	var total time.Duration
	for _, n := range e.nodes {
		info, err := n.Info(ctx, "cpu").Result()
		if err != nil {
			return 0
		}
		sys, _ := strconv.ParseFloat(InfoField(info, "used_cpu_sys"), 64)
		usr, _ := strconv.ParseFloat(InfoField(info, "used_cpu_user"), 64)
		total += time.Duration((sys + usr) * float64(time.Second))
	}
	return total
}

// RedisMemory is INFO memory's used_memory (every master's, summed).
func (e *Env) RedisMemory(ctx context.Context) int64 {
	var total int64
	for _, n := range e.nodes {
		info, err := n.Info(ctx, "memory").Result()
		if err != nil {
			return 0
		}
		v, _ := strconv.ParseInt(InfoField(info, "used_memory"), 10, 64)
		total += v
	}
	return total
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64
}

// commandStats sums every master's INFO commandstats.
func (e *Env) commandStats(ctx context.Context) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, n := range e.nodes {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil
		}
		addCommandStats(out, info)
	}
	return out
}

func addCommandStats(out map[string]cmdStat, info string) {
	for _, l := range strings.Split(info, "\r\n") {
		// cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,...
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				s.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		t := out[name]
		out[name] = cmdStat{calls: t.calls + s.calls, usec: t.usec + s.usec}
	}
}

// Usage is the CPU both sides spent during one phase, and what Redis spent
// it on.
type Usage struct {
	Wall     time.Duration
	AxCPU    time.Duration
	RedisCPU time.Duration
	Commands []CommandUsage // INFO commandstats deltas, most time first
	// PerMaster is each master's share of a cluster's Redis CPU and
	// commands (INFO commandstats calls, scripts' inner calls included).
	PerMaster []MasterShare
}

// MasterShare is one master's share (0–1) of a phase's Redis CPU and
// commands.
type MasterShare struct {
	CPU      float64 `json:"cpu"`
	Commands float64 `json:"commands"`
}

// CommandUsage is one command's share of Redis time during a phase.
// Commands called from scripts are counted on their own line as well as in
// the script's (evalsha) time.
type CommandUsage struct {
	Command string  `json:"command"`
	Calls   int64   `json:"calls"`
	Usec    int64   `json:"usec"`
	PerCall float64 `json:"usec_per_call"`
}

// Meter measures one phase.
type Meter struct {
	e     *Env
	start time.Time
	ax    time.Duration
	redis time.Duration
	cmds  map[string]cmdStat
	nodes []nodeTimes
}

// nodeTimes is one server's CPU and command count so far (a cluster's
// per-master share).
type nodeTimes struct {
	cpu   time.Duration
	calls int64
}

func (e *Env) perNode(ctx context.Context) []nodeTimes {
	if len(e.nodes) < 2 {
		return nil
	}
	out := make([]nodeTimes, len(e.nodes))
	for i, n := range e.nodes {
		info, err := n.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return nil
		}
		sys, _ := strconv.ParseFloat(InfoField(info, "used_cpu_sys"), 64)
		usr, _ := strconv.ParseFloat(InfoField(info, "used_cpu_user"), 64)
		out[i].cpu = time.Duration((sys + usr) * float64(time.Second))
		cs := map[string]cmdStat{}
		addCommandStats(cs, info)
		for _, c := range cs {
			out[i].calls += c.calls
		}
	}
	return out
}

// StartMeter starts measuring a phase: wall time, ax's CPU, Redis's CPU
// and commands.
func (e *Env) StartMeter(ctx context.Context) *Meter {
	return &Meter{e: e, start: time.Now(), ax: processCPU(), redis: e.redisCPU(ctx), cmds: e.commandStats(ctx), nodes: e.perNode(ctx)}
}

// Started is when the phase began.
func (m *Meter) Started() time.Time { return m.start }

// Stop ends the phase and returns what it used.
func (m *Meter) Stop(ctx context.Context) Usage {
	u := Usage{Wall: time.Since(m.start), AxCPU: processCPU() - m.ax, RedisCPU: m.e.redisCPU(ctx) - m.redis}
	if end := m.e.perNode(ctx); len(end) == len(m.nodes) && len(end) > 1 {
		var cpu time.Duration
		var calls int64
		for i := range end {
			cpu += end[i].cpu - m.nodes[i].cpu
			calls += end[i].calls - m.nodes[i].calls
		}
		for i := range end {
			var cs, ks float64
			if cpu > 0 {
				cs = float64(end[i].cpu-m.nodes[i].cpu) / float64(cpu)
			}
			if calls > 0 {
				ks = float64(end[i].calls-m.nodes[i].calls) / float64(calls)
			}
			u.PerMaster = append(u.PerMaster, MasterShare{CPU: Round(cs, 3), Commands: Round(ks, 3)})
		}
	}
	for name, s := range m.e.commandStats(ctx) {
		d := cmdStat{s.calls - m.cmds[name].calls, s.usec - m.cmds[name].usec}
		if d.calls <= 0 {
			continue
		}
		u.Commands = append(u.Commands, CommandUsage{Command: name, Calls: d.calls, Usec: d.usec, PerCall: float64(d.usec) / float64(d.calls)})
	}
	sort.Slice(u.Commands, func(i, j int) bool { return u.Commands[i].Usec > u.Commands[j].Usec })
	return u
}

// Host describes the machine a run measured.
type Host struct {
	CPUs      int     `json:"cpus"`
	Model     string  `json:"cpu_model,omitempty"`
	GoVersion string  `json:"go"`
	OS        string  `json:"os"`
	Load1     float64 `json:"load1_before"`
	Load1End  float64 `json:"load1_after"`
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, Load1: Load1()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// Load1 is the one-minute load average (0 when unknown): other jobs on the
// machine change every figure, so each summary records it.
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
