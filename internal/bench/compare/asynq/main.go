// Command asynqbench measures github.com/hibiken/asynq on this machine with
// the method of `ax bench throughput` (docs/benchmarks.md, "Comparing with
// another Redis queue, fairly"), so the two can be compared like for like.
//
// Phases:
//
//	enqueue       N no-op tasks (64 B JSON payload) with Client.Enqueue from
//	              16 goroutines (asynq has no batch enqueue)
//	drain         an asynq.Server with -concurrency slots starts; timed until
//	              the queue's own cumulative counter (Inspector
//	              QueueInfo.ProcessedTotal − FailedTotal) reports all N done
//	submit+drain  N more enqueued while the server drains; timed until 2N done
//	idle pickup   the server idle, one task at a time, 300–700 ms apart:
//	              enqueue call → handler start
//
// Per phase: tasks/s, Redis CPU (INFO cpu used_cpu_sys + used_cpu_user)
// and this process's CPU (getrusage RUSAGE_SELF), and both per task.
//
// It is its own Go module so that ax's go.mod does not gain asynq.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const (
	queueName = "default"
	noopType  = "bench.noop"
	idleType  = "bench.idle"
)

// payload64 is the 64-byte JSON payload ax bench uses.
var payload64 = []byte(`{"k":"` + strings.Repeat("x", 56) + `"}`)

type options struct {
	n            int
	concurrency  int
	retention    time.Duration
	output       string
	redisAddr    string
	redisServer  string
	enqueuers    int
	pool         int
	poll         time.Duration
	idle         int
	taskInterval time.Duration
	appendonly   string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 200000, "tasks per drain phase (the run enqueues 2×N)")
	flag.IntVar(&o.concurrency, "concurrency", 256, "asynq Config.Concurrency (total handler slots)")
	flag.DurationVar(&o.retention, "retention", 24*time.Hour, "asynq.Retention of every task: keep completed tasks, as ax does (0: asynq's default, completed tasks deleted)")
	flag.StringVar(&o.output, "o", "table", "output: table or json")
	flag.StringVar(&o.redisAddr, "redis", "", "use this Redis (host:port; it is FLUSHALLed) instead of starting a temporary redis-server")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary started when -redis is empty")
	flag.IntVar(&o.enqueuers, "enqueuers", 16, "goroutines calling Client.Enqueue")
	flag.IntVar(&o.pool, "pool", 0, "Redis connections of the asynq server (0: concurrency+16)")
	flag.DurationVar(&o.poll, "poll", 20*time.Millisecond, "how often the Inspector is asked for the processed count while draining")
	flag.IntVar(&o.idle, "idle", 10, "idle pickups measured at the end")
	flag.DurationVar(&o.taskInterval, "task-check-interval", 0, "asynq Config.TaskCheckInterval (0: asynq's default, 1s)")
	flag.StringVar(&o.appendonly, "appendonly", "no", "the temporary redis-server's persistence: no, or an appendfsync policy (everysec: how users run it; always)")
	flag.Parse()
	if o.appendonly != "no" && o.appendonly != "everysec" && o.appendonly != "always" {
		fmt.Fprintf(os.Stderr, "asynqbench: -appendonly %q: want no, everysec or always\n", o.appendonly)
		os.Exit(2)
	}
	if o.output != "table" && o.output != "json" {
		fmt.Fprintf(os.Stderr, "asynqbench: -o %q: want table or json\n", o.output)
		os.Exit(2)
	}
	if o.pool <= 0 {
		o.pool = o.concurrency + 16
	}
	// run returns on error or Ctrl-C too, so its deferred cleanup (the
	// temporary redis-server, its directory) always runs.
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "asynqbench:", err)
		os.Exit(1)
	}
}

// Phase is one measured step.
type Phase struct {
	Name       string         `json:"name"`
	Tasks      int            `json:"tasks"`
	WallS      float64        `json:"wall_s"`
	PerS       float64        `json:"tasks_per_s"`
	ProcCPUS   float64        `json:"proc_cpu_s"`
	RedisCPUS  float64        `json:"redis_cpu_s"`
	ProcUsPer  float64        `json:"proc_cpu_us_per_task"`
	RedisUsPer float64        `json:"redis_cpu_us_per_task"`
	Polls      int            `json:"inspector_polls,omitempty"`
	Commands   []CommandUsage `json:"redis_commands,omitempty"`
}

// CommandUsage is one line of the INFO commandstats delta of a phase.
type CommandUsage struct {
	Command string  `json:"command"`
	Calls   int64   `json:"calls"`
	Usec    int64   `json:"usec"`
	PerCall float64 `json:"usec_per_call"`
}

// Summary is the -o json document.
type Summary struct {
	Tool      string         `json:"tool"`
	Started   time.Time      `json:"started"`
	TookS     float64        `json:"took_s"`
	Host      Host           `json:"host"`
	Redis     RedisInfo      `json:"redis"`
	Params    map[string]any `json:"params"`
	Phases    []Phase        `json:"phases"`
	Idle      *Dist          `json:"idle_pickup,omitempty"`
	Counts    map[string]int `json:"counts"`
	MemPerTsk float64        `json:"redis_bytes_per_pending_task"`
	// PollRedisUs is the Redis CPU one Inspector.GetQueueInfo costs
	// (measured after the run, 50 calls): the drain phases include
	// polls × this, which ax's in-process counter does not pay.
	PollRedisUs float64  `json:"inspector_poll_redis_us"`
	Notes       []string `json:"notes,omitempty"`
}

// Host describes the machine.
type Host struct {
	CPUs      int     `json:"cpus"`
	Model     string  `json:"cpu_model,omitempty"`
	GoVersion string  `json:"go"`
	OS        string  `json:"os"`
	Load1     float64 `json:"load1_before"`
	Load1End  float64 `json:"load1_after"`
}

// RedisInfo says which Redis the run used.
type RedisInfo struct {
	Addr    string `json:"addr"`
	Managed bool   `json:"managed"`
	Version string `json:"version"`
	Config  string `json:"config"`
}

// Dist is a small latency distribution in ms.
type Dist struct {
	N       int       `json:"n"`
	P50Ms   float64   `json:"p50_ms"`
	MaxMs   float64   `json:"max_ms"`
	MinMs   float64   `json:"min_ms"`
	Samples []float64 `json:"samples_ms"`
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	s := &Summary{Tool: "asynqbench (asynq " + asynqVersion + ")", Started: start.UTC(), Host: hostInfo(),
		Counts: map[string]int{},
		Params: map[string]any{"n": o.n, "concurrency": o.concurrency, "retention": o.retention.String(),
			"enqueuers": o.enqueuers, "server_pool_size": o.pool, "poll": o.poll.String(),
			"payload_bytes": len(payload64), "queue": queueName, "task_check_interval": o.taskInterval.String()}}

	addr := o.redisAddr
	if addr == "" {
		srv, err := startServer(o.redisServer, o.appendonly)
		if err != nil {
			return err
		}
		defer srv.stop()
		addr = srv.addr
		s.Redis.Managed = true
		s.Redis.Config = `temporary redis-server: ` + persistence(o.appendonly) + `, save "", maxmemory-policy noeviction`
		fmt.Fprintf(os.Stderr, "asynqbench: started a temporary redis-server on %s\n", addr)
	}
	s.Redis.Addr = addr
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", addr, err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	if !s.Redis.Managed {
		cfg, _ := rdb.ConfigGet(ctx, "appendonly").Result()
		s.Redis.Config = "external Redis (flushed): appendonly " + cfg["appendonly"]
	}
	s.Redis.Version = infoField(info(ctx, rdb, "server"), "redis_version")

	ropt := asynq.RedisClientOpt{Addr: addr}
	copt := ropt
	copt.PoolSize = o.enqueuers + 4
	client := asynq.NewClient(copt)
	defer client.Close()
	insp := asynq.NewInspector(ropt)
	defer insp.Close()

	taskOpts := []asynq.Option{asynq.Queue(queueName)}
	if o.retention > 0 {
		taskOpts = append(taskOpts, asynq.Retention(o.retention))
	}
	noop := asynq.NewTask(noopType, payload64, taskOpts...)

	// (a) Enqueue N.
	mem0 := usedMemory(ctx, rdb)
	m := startMeter(ctx, rdb)
	if err := enqueue(ctx, client, noop, o.n, o.enqueuers); err != nil {
		return err
	}
	s.Phases = append(s.Phases, m.stop(ctx, "enqueue", o.n, 0))
	s.MemPerTsk = round(float64(usedMemory(ctx, rdb)-mem0)/float64(o.n), 1)
	progress("enqueue", s.Phases[len(s.Phases)-1])

	// (b) Start the server; time until asynq reports N processed.
	var idleMu sync.Mutex
	var idleCh chan time.Time
	handler := asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		if t.Type() == idleType {
			now := time.Now()
			idleMu.Lock()
			ch := idleCh
			idleMu.Unlock()
			if ch != nil {
				ch <- now
			}
		}
		return nil
	})
	sopt := ropt
	sopt.PoolSize = o.pool
	srv := asynq.NewServer(sopt, asynq.Config{
		Concurrency:       o.concurrency,
		Queues:            map[string]int{queueName: 1},
		LogLevel:          asynq.WarnLevel,
		TaskCheckInterval: o.taskInterval,
		ShutdownTimeout:   5 * time.Second,
	})
	m = startMeter(ctx, rdb)
	if err := srv.Start(handler); err != nil {
		return fmt.Errorf("asynq server: %w", err)
	}
	defer srv.Shutdown()
	polls, err := awaitProcessed(ctx, insp, o.n, o.poll)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	s.Phases = append(s.Phases, m.stop(ctx, "drain", o.n, polls))
	progress("drain", s.Phases[len(s.Phases)-1])

	// (c) Enqueue N more while the server drains; time until 2N processed.
	m = startMeter(ctx, rdb)
	encErr := make(chan error, 1)
	go func() { encErr <- enqueue(ctx, client, noop, o.n, o.enqueuers) }()
	polls, err = awaitProcessed(ctx, insp, 2*o.n, o.poll)
	if err != nil {
		return fmt.Errorf("submit+drain: %w", err)
	}
	if err := <-encErr; err != nil {
		return err
	}
	s.Phases = append(s.Phases, m.stop(ctx, "submit+drain", o.n, polls))
	progress("submit+drain", s.Phases[len(s.Phases)-1])

	// (d) Idle pickups: the server has found the queue empty and polls.
	idle, err := idlePickups(ctx, client, asynq.NewTask(idleType, payload64, taskOpts...), o.idle, func(ch chan time.Time) {
		idleMu.Lock()
		idleCh = ch
		idleMu.Unlock()
	})
	if err != nil {
		return err
	}
	if len(idle) > 0 {
		s.Idle = dist(idle)
		fmt.Fprintf(os.Stderr, "asynqbench: idle pickup p50 %.1f ms, max %.1f ms\n", s.Idle.P50Ms, s.Idle.MaxMs)
	}

	srv.Shutdown()
	return finish(ctx, s, o, rdb, insp, len(idle), start)
}

// finish records asynq's own counts and what a poll costs, notes anything
// unexpected, and writes the summary.
func finish(ctx context.Context, s *Summary, o options, rdb *redis.Client, insp *asynq.Inspector, idle int, start time.Time) error {
	// Counts from asynq's own figures.
	qi, err := insp.GetQueueInfo(queueName)
	if err != nil {
		return err
	}
	s.Counts["processed_total"] = qi.ProcessedTotal
	s.Counts["failed_total"] = qi.FailedTotal
	s.Counts["completed_kept"] = qi.Completed
	s.Counts["pending"] = qi.Pending
	s.Counts["active"] = qi.Active
	s.Counts["retry"] = qi.Retry
	s.Counts["archived"] = qi.Archived
	s.Counts["enqueued"] = 2*o.n + idle
	if qi.FailedTotal != 0 || qi.ProcessedTotal != 2*o.n+idle {
		s.Notes = append(s.Notes, fmt.Sprintf("processed_total %d, failed_total %d: expected %d and 0", qi.ProcessedTotal, qi.FailedTotal, 2*o.n+idle))
	}
	if o.retention > 0 && qi.Completed != qi.ProcessedTotal-qi.FailedTotal {
		s.Notes = append(s.Notes, fmt.Sprintf("completed kept %d ≠ processed %d", qi.Completed, qi.ProcessedTotal-qi.FailedTotal))
	}

	// What one Inspector poll costs Redis (the drain phases paid it
	// polls times; ax's counter is in-process).
	s.PollRedisUs = pollCost(ctx, rdb, insp)
	for _, p := range s.Phases {
		if p.Polls > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %d Inspector polls ≈ %.2f µs of Redis per task (included in its Redis figure)",
				p.Name, p.Polls, float64(p.Polls)*s.PollRedisUs/float64(p.Tasks)))
		}
	}
	if o.retention == 0 {
		s.Notes = append(s.Notes, "retention 0: asynq deletes each task's hash when it completes (ax keeps every task 24 h)")
	}

	s.Host.Load1End = load1()
	s.TookS = round(time.Since(start).Seconds(), 3)
	if s.Host.Load1 > float64(s.Host.CPUs) || s.Host.Load1End > float64(s.Host.CPUs) {
		s.Notes = append(s.Notes, fmt.Sprintf("load average %.1f before, %.1f after on %d CPUs: other jobs shared the machine",
			s.Host.Load1, s.Host.Load1End, s.Host.CPUs))
	}
	if o.output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	writeText(os.Stdout, s)
	return nil
}

// idlePickups enqueues n tasks one at a time after the server found the queue
// empty, each after a pause of 300-700 ms, and returns how long each took to
// reach its handler; arm hands the handler the channel of the next one.
func idlePickups(ctx context.Context, client *asynq.Client, idleTask *asynq.Task, n int, arm func(chan time.Time)) ([]time.Duration, error) {
	var idle []time.Duration
	for i := range n {
		wait := time.Duration(300+100*(i%5)) * time.Millisecond
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		ch := make(chan time.Time, 1)
		arm(ch)
		t0 := time.Now()
		if _, err := client.EnqueueContext(ctx, idleTask); err != nil {
			return nil, fmt.Errorf("idle enqueue: %w", err)
		}
		select {
		case t1 := <-ch:
			idle = append(idle, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, errors.New("idle pickup: no handler start within 10s")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return idle, nil
}

func progress(name string, p Phase) {
	fmt.Fprintf(os.Stderr, "asynqbench: %-13s %8.0f tasks/s  redis %6.2f µs/task  proc %6.2f µs/task\n", name, p.PerS, p.RedisUsPer, p.ProcUsPer)
}

// enqueue enqueues n copies of t from conns goroutines, one task per call.
func enqueue(ctx context.Context, c *asynq.Client, t *asynq.Task, n, conns int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for range max(1, conns) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				if _, err := c.EnqueueContext(ctx, t); err != nil {
					errc <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// processed is asynq's own cumulative count of successful tasks in the
// queue: QueueInfo.ProcessedTotal (cumulative; Processed resets at UTC
// midnight) minus FailedTotal. Completed counts only tasks kept by
// Retention, so it is 0 without it.
func processed(insp *asynq.Inspector) (int, error) {
	qi, err := insp.GetQueueInfo(queueName)
	if err != nil {
		return 0, err
	}
	return qi.ProcessedTotal - qi.FailedTotal, nil
}

// awaitProcessed polls the Inspector until total tasks are processed; it
// gives up when the count does not move for 30s.
func awaitProcessed(ctx context.Context, insp *asynq.Inspector, total int, every time.Duration) (polls int, err error) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastMove := -1, time.Now()
	for {
		n, err := processed(insp)
		polls++
		if err != nil {
			return polls, err
		}
		if n >= total {
			return polls, nil
		}
		if n != last {
			last, lastMove = n, time.Now()
		} else if time.Since(lastMove) > 30*time.Second {
			return polls, fmt.Errorf("no progress for 30s at %d of %d", n, total)
		}
		select {
		case <-ctx.Done():
			return polls, ctx.Err()
		case <-t.C:
		}
	}
}

// pollCost is the Redis CPU of one GetQueueInfo, in µs (median of 5
// rounds of 10 calls).
func pollCost(ctx context.Context, rdb *redis.Client, insp *asynq.Inspector) float64 {
	var per []float64
	for range 5 {
		r0 := redisCPU(ctx, rdb)
		for range 10 {
			if _, err := insp.GetQueueInfo(queueName); err != nil {
				return 0
			}
		}
		per = append(per, float64((redisCPU(ctx, rdb)-r0).Microseconds())/10)
	}
	sort.Float64s(per)
	return round(per[len(per)/2], 1)
}

// meter measures one phase.
type meter struct {
	rdb   *redis.Client
	start time.Time
	proc  time.Duration
	redis time.Duration
	cmds  map[string]cmdStat
}

func startMeter(ctx context.Context, rdb *redis.Client) *meter {
	return &meter{rdb: rdb, start: time.Now(), proc: processCPU(), redis: redisCPU(ctx, rdb), cmds: commandStats(ctx, rdb)}
}

func (m *meter) stop(ctx context.Context, name string, tasks, polls int) Phase {
	wall := time.Since(m.start)
	proc := processCPU() - m.proc
	red := redisCPU(ctx, m.rdb) - m.redis
	p := Phase{Name: name, Tasks: tasks, WallS: round(wall.Seconds(), 3), Polls: polls,
		ProcCPUS: round(proc.Seconds(), 3), RedisCPUS: round(red.Seconds(), 3)}
	if wall > 0 {
		p.PerS = round(float64(tasks)/wall.Seconds(), 1)
	}
	if tasks > 0 {
		p.ProcUsPer = round(float64(proc.Microseconds())/float64(tasks), 2)
		p.RedisUsPer = round(float64(red.Microseconds())/float64(tasks), 2)
	}
	for cmd, s := range commandStats(ctx, m.rdb) {
		d := cmdStat{s.calls - m.cmds[cmd].calls, s.usec - m.cmds[cmd].usec}
		if d.calls > 0 && cmd != "info" {
			p.Commands = append(p.Commands, CommandUsage{Command: cmd, Calls: d.calls, Usec: d.usec, PerCall: round(float64(d.usec)/float64(d.calls), 2)})
		}
	}
	sort.Slice(p.Commands, func(i, j int) bool { return p.Commands[i].Usec > p.Commands[j].Usec })
	p.Commands = p.Commands[:min(len(p.Commands), 8)]
	return p
}

// processCPU is this process's CPU time (user + system, all threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func info(ctx context.Context, rdb *redis.Client, section string) string {
	s, _ := rdb.Info(ctx, section).Result()
	return s
}

// redisCPU is INFO cpu used_cpu_sys + used_cpu_user.
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	in := info(ctx, rdb, "cpu")
	sys, _ := strconv.ParseFloat(infoField(in, "used_cpu_sys"), 64)
	usr, _ := strconv.ParseFloat(infoField(in, "used_cpu_user"), 64)
	return time.Duration((sys + usr) * float64(time.Second))
}

func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	n, _ := strconv.ParseInt(infoField(info(ctx, rdb, "memory"), "used_memory"), 10, 64)
	return n
}

type cmdStat struct{ calls, usec int64 }

func commandStats(ctx context.Context, rdb *redis.Client) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, l := range strings.Split(info(ctx, rdb, "commandstats"), "\r\n") {
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
		out[name] = s
	}
	return out
}

func infoField(info, key string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			return v
		}
	}
	return ""
}

func dist(ds []time.Duration) *Dist {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = round(float64(d.Microseconds())/1000, 2)
	}
	sorted := append([]float64(nil), ms...)
	sort.Float64s(sorted)
	// p50: the lower median, as a nearest-rank percentile.
	return &Dist{N: len(ms), P50Ms: sorted[(len(sorted)-1)/2], MaxMs: sorted[len(sorted)-1], MinMs: sorted[0], Samples: ms}
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, Load1: load1()}
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

func load1() float64 {
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

func round(v float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

func writeText(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "%s, %s\n", s.Tool, s.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "host: %d CPUs %s, %s, %s; load %.2f before, %.2f after\n", s.Host.CPUs, s.Host.Model, s.Host.OS, s.Host.GoVersion, s.Host.Load1, s.Host.Load1End)
	fmt.Fprintf(w, "redis: %s %s (%s)\n", s.Redis.Version, s.Redis.Addr, s.Redis.Config)
	fmt.Fprintf(w, "params: n=%v concurrency=%v retention=%v enqueuers=%v server pool=%v poll=%v\n\n",
		s.Params["n"], s.Params["concurrency"], s.Params["retention"], s.Params["enqueuers"], s.Params["server_pool_size"], s.Params["poll"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttasks\twall s\ttasks/s\tredis cpu s\tproc cpu s\tredis µs/task\tproc µs/task\t")
	for _, p := range s.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", p.Name, p.Tasks, p.WallS, p.PerS, p.RedisCPUS, p.ProcCPUS, p.RedisUsPer, p.ProcUsPer)
	}
	tw.Flush()
	if s.Idle != nil {
		fmt.Fprintf(w, "\nidle pickup (enqueue → handler start, %d): p50 %.1f ms, max %.1f ms, min %.1f ms\n", s.Idle.N, s.Idle.P50Ms, s.Idle.MaxMs, s.Idle.MinMs)
	}
	fmt.Fprintf(w, "redis memory per pending task: %.0f B\n", s.MemPerTsk)
	fmt.Fprintf(w, "inspector poll: %.1f µs of Redis each\n", s.PollRedisUs)
	keys := make([]string, 0, len(s.Counts))
	for k := range s.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var cs []string
	for _, k := range keys {
		cs = append(cs, fmt.Sprintf("%s=%d", k, s.Counts[k]))
	}
	fmt.Fprintf(w, "counts (asynq Inspector): %s\n", strings.Join(cs, " "))
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// asynqVersion is the asynq this module requires (go.mod).
const asynqVersion = "v0.26.0"

// server is a temporary redis-server child process.
type server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func persistence(appendonly string) string {
	if appendonly == "no" {
		return "appendonly no"
	}
	return "appendonly yes, appendfsync " + appendonly
}

func startServer(bin, appendonly string) (*server, error) {
	if _, err := exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("%s not found on PATH: install Redis or pass -redis ADDR: %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "asynqbench-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, done: make(chan struct{})}
		if lastErr = s.start(bin, port, appendonly); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func (s *server) start(bin string, port int, appendonly string) error {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--maxmemory-policy", "noeviction", "--logfile", filepath.Join(s.dir, "redis.log")}
	if appendonly == "no" {
		args = append(args, "--appendonly", "no")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", appendonly)
	}
	s.cmd = exec.Command(bin, args...)
	// Its own process group (Ctrl-C reaches only us; we stop it), and it
	// dies with this process even if we are killed.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on port %d exited: %s", port, lastLog(filepath.Join(s.dir, "redis.log")))
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("redis-server on port %d did not accept connections within 5s", port)
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

func lastLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "no log"
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	return last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
