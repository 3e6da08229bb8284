package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/internal/bench"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Peer tools `ax bench compare` runs, beside ax itself. Each is a program
// of its own under internal/bench/compare/<dir> (its own Go module or npm
// package, so ax's go.mod gains none of them) that measures its queue with
// the phases of `ax bench throughput` and prints the same JSON fields.
var peerTools = []string{"ax", "asynq", "bullmq", "river", "river-1ms"}

// Options size a comparison run.
type Options struct {
	// Exe is the ax binary (`ax bench throughput` is run as a child, like
	// the others, so that no run shares a process or a Redis with another).
	Exe string
	// Dir is internal/bench/compare of an ax source tree (default: found
	// from the working directory upwards).
	Dir string
	// Tools to run, in this order each round (default all of peerTools
	// whose prerequisites exist: go for asynq and river, node for bullmq,
	// PostgreSQL for river).
	Tools  []string
	Rounds int // rounds of every tool (default 3)
	N      int // tasks per drain phase (default 100 000)
	Single int // of the first N, submitted one per call (default N/10, ≤ 20 000)
	// Workers × Concurrency are ax's workers and slots; the others get the
	// same total slots in one process.
	Workers, Concurrency int
	// AOF: every Redis with appendonly yes and this appendfsync policy;
	// River's PostgreSQL then gets fsync on (synchronous_commit stays off:
	// commits are flushed by the WAL writer within 200 ms, like everysec).
	// A comma-separated list ("none,everysec") runs every tool once per
	// policy in each round, back to back, so that a policy's cost is read
	// in the same minutes; "none" is no persistence. A run with a policy
	// is named tool@policy (ax@everysec) and compared with ax@policy.
	AOF string
	// RedisServer is the redis-server binary the tools start.
	RedisServer string
	// RawDir, when set, receives every run's JSON (round-tool.json).
	RawDir string
}

func (o *Options) defaults() error {
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.N <= 0 {
		o.N = 100000
	}
	if o.Single <= 0 {
		o.Single = min(20000, o.N/10)
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 128
	}
	if o.RedisServer == "" {
		o.RedisServer = "redis-server"
	}
	for _, t := range o.Tools {
		if !slices.Contains(peerTools, t) {
			return fmt.Errorf("bench compare: tool %q: want one of %s", t, strings.Join(peerTools, ", "))
		}
	}
	for _, a := range o.policies() {
		switch a {
		case "", "everysec", "always":
		default:
			return fmt.Errorf("bench compare: --aof %q: want everysec, always or none (or a list of them)", o.AOF)
		}
	}
	if o.Dir == "" {
		d, err := findCompareDir()
		if err != nil {
			return err
		}
		o.Dir = d
	}
	return nil
}

// policies are the persistence settings each tool runs under, in order
// ("" is none).
func (o *Options) policies() []string {
	var ps []string
	for _, a := range strings.Split(o.AOF, ",") {
		a = strings.TrimSpace(a)
		if a == "none" {
			a = ""
		}
		if !slices.Contains(ps, a) {
			ps = append(ps, a)
		}
	}
	return ps
}

// withPolicy is a run's name: the tool, and the persistence policy when
// there is one.
func withPolicy(tool, aof string) string {
	if aof == "" {
		return tool
	}
	return tool + "@" + aof
}

// findCompareDir looks for internal/bench/compare from the working
// directory upwards (the tools are built from their sources).
func findCompareDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "internal", "bench", "compare")
		if st, err := os.Stat(filepath.Join(c, "asynq", "go.mod")); err == nil && !st.IsDir() {
			return c, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("bench compare: internal/bench/compare not found above the working directory: run it in an ax source tree or pass --dir")
		}
	}
}

// peerRun is what the comparison reads from each tool's JSON: the phases
// by ax's names, the backend's CPU (Redis or PostgreSQL) and the queue
// process's CPU per task.
type peerRun struct {
	Phases []peerPhase `json:"phases"`
	Idle   *struct {
		P50 float64 `json:"p50_ms"`
	} `json:"idle_pickup"`
	Notes []string `json:"notes"`
}

type peerPhase struct {
	Name  string  `json:"name"`
	PerS  float64 `json:"tasks_per_s"`
	Redis float64 `json:"redis_cpu_us_per_task"`
	Pg    float64 `json:"postgres_cpu_us_per_task"`
	Ax    float64 `json:"ax_cpu_us_per_task"`
	Proc  float64 `json:"proc_cpu_us_per_task"`
}

type peerFig struct{ rate, backend, proc float64 }

// phase returns a phase's figures; asynq's "enqueue" (one task per call
// from 16 goroutines) is ax's submit-single.
func (r *peerRun) phase(name string) (peerFig, bool) {
	for _, p := range r.Phases {
		if p.Name == name || (name == "submit-single" && p.Name == "enqueue") {
			return peerFig{p.PerS, p.Redis + p.Pg, p.Ax + p.Proc}, true
		}
	}
	return peerFig{}, false
}

// peerCmd is how one tool is run.
type peerCmd struct {
	name string // the tool with its policy: asynq@everysec
	base string // the tool without it: asynq
	ax   string // the ax run it is compared with: ax@everysec
	argv []string
	dir  string
}

// Peers runs ax and the other queues' bench programs interleaved (round 1:
// ax, asynq, BullMQ, River; round 2: the same…), each on a Redis (or
// PostgreSQL) of its own that it starts and stops, and reports every run,
// the medians and the ratios of ax to each in the same round.
func Run(ctx context.Context, o Options, progress bench.Progress) (*bench.Summary, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := bench.NewSummary("compare")
	slots := o.Workers * o.Concurrency
	s.Params = map[string]any{"n": o.N, "single": o.Single, "rounds": o.Rounds, "ax_workers": o.Workers,
		"ax_concurrency": o.Concurrency, "peer_concurrency": slots, "aof": o.AOF, "dir": o.Dir}
	bin, err := os.MkdirTemp("", "axbench-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	cmds, notes := o.prepare(ctx, bin)
	s.Notes = append(s.Notes, notes...)
	if len(cmds) == 0 {
		return nil, errors.New("bench compare: no tool can run here: " + strings.Join(notes, "; "))
	}
	var persists []string
	for _, a := range o.policies() {
		persists = append(persists, persistence(a))
	}
	s.Redis = bench.RedisInfo{Managed: true, Config: "one temporary redis-server per run (each tool starts its own): " + strings.Join(persists, " / ") + `, save "", maxmemory-policy noeviction`}

	type result struct {
		round int
		tool  string
		load  float64
		run   *peerRun
	}
	var results []result
	seen := map[string]bool{}
	total := o.Rounds * len(cmds)
	for r := 1; r <= o.Rounds; r++ {
		for _, c := range cmds {
			progress.Report("compare", len(results), total)
			load := bench.Load1()
			run, raw, err := runPeer(ctx, c)
			if o.RawDir != "" {
				name := fmt.Sprintf("%d-%s.json", r, c.name)
				if err != nil {
					name = fmt.Sprintf("%d-%s.stderr.txt", r, c.name)
				}
				_ = os.WriteFile(filepath.Join(o.RawDir, name), raw, 0o644)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				// One failed run does not void the others: it is reported
				// and its round has no ratio for that tool.
				s.Notes = append(s.Notes, fmt.Sprintf("round %d, %s FAILED: %v", r, c.name, err))
				results = append(results, result{r, c.name, load, &peerRun{}})
				continue
			}
			for _, n := range run.Notes {
				// A tool's note that every round repeats (its settings) is
				// said once; the load is in the runs table.
				if !strings.HasPrefix(n, "load average") && !seen[c.name+"\x00"+n] {
					seen[c.name+"\x00"+n] = true
					s.Notes = append(s.Notes, fmt.Sprintf("round %d, %s: %s", r, c.name, n))
				}
			}
			results = append(results, result{r, c.name, load, run})
		}
	}
	progress.Report("compare", total, total)

	phases := []string{"submit-single", "drain", "submit+drain"}
	runs := bench.Table{Title: "every run, in the order run (tasks/s; backend = Redis or PostgreSQL CPU, proc = the queue's process CPU, µs per task)",
		Head: []string{"ROUND", "TOOL", "LOAD1", "SUBMIT ONE/CALL", "DRAIN", "SUBMIT+DRAIN", "DRAIN BACKEND µs", "DRAIN PROC µs", "S+D BACKEND µs", "S+D PROC µs", "IDLE PICKUP ms"}}
	for _, res := range results {
		row := []string{strconv.Itoa(res.round), res.tool, fmt.Sprintf("%.1f", res.load)}
		for _, ph := range phases {
			row = append(row, figCell(res.run, ph, func(f peerFig) float64 { return f.rate }, "%.0f"))
		}
		for _, ph := range phases[1:] {
			row = append(row, figCell(res.run, ph, func(f peerFig) float64 { return f.backend }, "%.1f"),
				figCell(res.run, ph, func(f peerFig) float64 { return f.proc }, "%.1f"))
		}
		idle := "—"
		if res.run.Idle != nil {
			idle = fmt.Sprintf("%.1f", res.run.Idle.P50)
		}
		runs.Rows = append(runs.Rows, append(row, idle))
	}

	// Medians per tool, and the median over rounds of ax ÷ tool in the
	// same round.
	med := bench.Table{Title: fmt.Sprintf("medians of %d rounds; ax ÷ tool is the median of the per-round ratios (same minutes)", o.Rounds),
		Head: []string{"TOOL", "DRAIN /s", "SUBMIT+DRAIN /s", "SUBMIT ONE/CALL /s", "DRAIN CPU µs (backend+proc)", "S+D CPU µs", "AX ÷ TOOL DRAIN", "AX ÷ TOOL S+D", "AX ÷ TOOL DRAIN CPU"}}
	get := func(tool string, round int) *peerRun {
		for _, res := range results {
			if res.tool == tool && res.round == round {
				return res.run
			}
		}
		return nil
	}
	for _, c := range cmds {
		var drain, both, single, dcpu, bcpu, rd, rb, rc []float64
		for r := 1; r <= o.Rounds; r++ {
			run := get(c.name, r)
			if f, ok := run.phase("drain"); ok {
				drain = append(drain, f.rate)
				dcpu = append(dcpu, f.backend+f.proc)
			}
			if f, ok := run.phase("submit+drain"); ok {
				both = append(both, f.rate)
				bcpu = append(bcpu, f.backend+f.proc)
			}
			if f, ok := run.phase("submit-single"); ok {
				single = append(single, f.rate)
			}
			if ax := get(c.ax, r); ax != nil && c.name != c.ax {
				rd, rb, rc = addRatios(ax, run, rd, rb, rc)
			}
		}
		row := []string{c.name, medCell(drain, "%.0f"), medCell(both, "%.0f"), medCell(single, "%.0f"), medCell(dcpu, "%.1f"), medCell(bcpu, "%.1f")}
		if c.name == c.ax {
			row = append(row, "—", "—", "—")
		} else {
			row = append(row, medCell(rd, "%.2f×"), medCell(rb, "%.2f×"), medCell(rc, "%.2f×"))
			if len(rd) > 0 {
				s.Add("ax_drain_vs_"+c.name, bench.Round(median(rd), 2), "ratio", "higher", "")
			}
			if len(rb) > 0 {
				s.Add("ax_submit_and_drain_vs_"+c.name, bench.Round(median(rb), 2), "ratio", "higher", "")
			}
		}
		med.Rows = append(med.Rows, row)
	}
	s.Tables = []bench.Table{runs, med}
	if cost := policyCost(cmds, o.Rounds, get); len(cost.Rows) > 0 {
		s.Tables = append(s.Tables, cost)
	}
	s.Finish()
	return s, nil
}

// policyCost is, for every run with a persistence policy, the median over
// rounds of its figures ÷ the same tool's without one in the same round
// (only when both ran).
func policyCost(cmds []peerCmd, rounds int, get func(string, int) *peerRun) bench.Table {
	t := bench.Table{Title: "with the policy ÷ without, same round (median of the per-round ratios): rates, and backend CPU per task",
		Head: []string{"RUN", "DRAIN", "SUBMIT+DRAIN", "SUBMIT ONE/CALL", "DRAIN BACKEND µs", "S+D BACKEND µs"}}
	for _, c := range cmds {
		if c.base == c.name || !slices.ContainsFunc(cmds, func(b peerCmd) bool { return b.name == c.base }) {
			continue
		}
		ratios := make([][]float64, 5)
		for r := 1; r <= rounds; r++ {
			with, without := get(c.name, r), get(c.base, r)
			for i, ph := range []string{"drain", "submit+drain", "submit-single"} {
				w, ok1 := with.phase(ph)
				n, ok2 := without.phase(ph)
				if ok1 && ok2 && n.rate > 0 {
					ratios[i] = append(ratios[i], w.rate/n.rate)
					if i < 2 && n.backend > 0 {
						ratios[3+i] = append(ratios[3+i], w.backend/n.backend)
					}
				}
			}
		}
		row := []string{c.name + " ÷ " + c.base}
		for _, v := range ratios {
			row = append(row, medCell(v, "%.2f×"))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// addRatios appends one round's ax ÷ tool figures: drain rate to rd,
// submit+drain rate to rb, and tool ÷ ax drain CPU per task to rc, each
// only when both ran the phase.
func addRatios(ax, run *peerRun, rd, rb, rc []float64) (_, _, _ []float64) {
	a, aok := ax.phase("drain")
	t, ok := run.phase("drain")
	if aok && ok && t.rate > 0 {
		rd = append(rd, a.rate/t.rate)
		if a.backend+a.proc > 0 {
			rc = append(rc, (t.backend+t.proc)/(a.backend+a.proc))
		}
	}
	a, aok = ax.phase("submit+drain")
	if t, ok := run.phase("submit+drain"); aok && ok && t.rate > 0 {
		rb = append(rb, a.rate/t.rate)
	}
	return rd, rb, rc
}

func persistence(aof string) string {
	if aof == "" {
		return "appendonly no"
	}
	return "appendonly yes, appendfsync " + aof
}

// prepare builds the Go tools and checks each tool's prerequisites; a
// tool that cannot run here is left out with a note (unless none can).
func (o *Options) prepare(ctx context.Context, bin string) ([]peerCmd, []string) {
	tools := o.Tools
	explicit := len(tools) > 0
	if !explicit {
		tools = peerTools
	}
	var cmds []peerCmd
	var notes []string
	skip := func(t, why string) {
		if n := t + " not run: " + why; !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	slots := strconv.Itoa(o.Workers * o.Concurrency)
	built := map[string]string{}
	build := func(dir string) (string, error) {
		if p, ok := built[dir]; ok {
			return p, nil
		}
		if _, err := exec.LookPath("go"); err != nil {
			return "", errors.New("go is not on PATH (the tool is built from internal/bench/compare/" + dir + ")")
		}
		out := filepath.Join(bin, dir+"bench")
		c := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
		c.Dir = filepath.Join(o.Dir, dir)
		if b, err := c.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build in %s: %v: %s", c.Dir, err, lastLine(string(b)))
		}
		built[dir] = out
		return out, nil
	}
	for _, t := range tools {
		for _, aof := range o.policies() {
			if c, ok := o.toolCmd(ctx, t, aof, slots, build, skip); ok {
				c.name, c.base, c.ax = withPolicy(t, aof), t, withPolicy("ax", aof)
				cmds = append(cmds, c)
			}
		}
	}
	return cmds, notes
}

// toolCmd is how tool t runs under persistence policy aof, or false (and a
// note through skip) when it cannot run here.
func (o *Options) toolCmd(ctx context.Context, t, aof, slots string, build func(string) (string, error), skip func(t, why string)) (peerCmd, bool) {
	n, single := strconv.Itoa(o.N), strconv.Itoa(o.Single)
	switch t {
	case "ax":
		argv := []string{o.Exe, "bench", "throughput", "-n", n, "--single", single, "--workers", strconv.Itoa(o.Workers),
			"--concurrency", strconv.Itoa(o.Concurrency), "--redis-server", o.RedisServer, "-o", "json"}
		if aof != "" {
			argv = append(argv, "--aof", aof)
		}
		return peerCmd{argv: argv}, true
	case "asynq":
		p, err := build("asynq")
		if err != nil {
			skip(t, err.Error())
			return peerCmd{}, false
		}
		argv := []string{p, "-n", n, "-concurrency", slots, "-redis-server", o.RedisServer, "-o", "json"}
		if aof != "" {
			argv = append(argv, "-appendonly", aof)
		}
		return peerCmd{argv: argv}, true
	case "bullmq":
		node, err := exec.LookPath("node")
		if err != nil {
			skip(t, "node is not on PATH")
			return peerCmd{}, false
		}
		dir := filepath.Join(o.Dir, "bullmq")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "bullmq")); err != nil {
			// Its pinned packages (package-lock.json), from the npm registry.
			c := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
			c.Dir = dir
			if b, err := c.CombinedOutput(); err != nil {
				skip(t, fmt.Sprintf("npm ci in %s: %v: %s", dir, err, lastLine(string(b))))
				return peerCmd{}, false
			}
		}
		argv := []string{node, "bench.mjs", "-n", n, "-single", single, "-concurrency", slots, "-redis-server", o.RedisServer, "-o", "json"}
		if aof != "" {
			argv = append(argv, "-appendonly", aof)
		}
		return peerCmd{argv: argv, dir: dir}, true
	case "river", "river-1ms":
		if !havePostgres() {
			skip(t, "PostgreSQL (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH")
			return peerCmd{}, false
		}
		p, err := build("river")
		if err != nil {
			skip(t, err.Error())
			return peerCmd{}, false
		}
		argv := []string{p, "-n", n, "-single", single, "-concurrency", slots, "-o", "json"}
		if t == "river-1ms" {
			argv = append(argv, "-fetch-cooldown", "1ms")
		}
		if aof != "" {
			argv = append(argv, "-fsync")
		}
		return peerCmd{argv: argv}, true
	}
	return peerCmd{}, false
}

func havePostgres() bool {
	if ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(ms) > 0 {
		return true
	}
	_, err := exec.LookPath("initdb")
	return err == nil
}

// runPeer runs one tool and decodes its JSON summary.
func runPeer(ctx context.Context, c peerCmd) (*peerRun, []byte, error) {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, errb.Bytes(), fmt.Errorf("%s: %v: %s", strings.Join(c.argv, " "), err, lastLines(errb.String(), 6))
	}
	var r peerRun
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, nil, fmt.Errorf("%s: its output is not a JSON summary: %w", c.argv[0], err)
	}
	if len(r.Phases) == 0 {
		return nil, nil, fmt.Errorf("%s: no phases in its summary", c.argv[0])
	}
	return &r, out.Bytes(), nil
}

func figCell(r *peerRun, phase string, v func(peerFig) float64, format string) string {
	f, ok := r.phase(phase)
	if !ok {
		return "—"
	}
	return fmt.Sprintf(format, v(f))
}

func medCell(v []float64, format string) string {
	if len(v) == 0 {
		return "—"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	return fmt.Sprintf(format+" ("+format+" – "+format+")", median(v), lo, hi)
}

// median of v (the mean of the middle two when even).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func lastLine(s string) string { return lastLines(s, 1) }

// lastLines is the last n lines of s, joined with " | ".
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}
