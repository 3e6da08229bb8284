package command

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/internal/bench/api"
	"github.com/ax-sched/ax/internal/bench/delayed"
	"github.com/ax-sched/ax/internal/bench/peers"
	"github.com/ax-sched/ax/internal/progress"
	"github.com/ax-sched/ax/internal/server"
)

// benchFlags are the flags every `ax bench` mode shares.
type benchFlags struct {
	target     bench.Target
	compare    string
	cpuprofile string
	verbose    bool
	workers    bench.WorkerOptions
}

// New is the `ax bench` command and its modes.
func New() *cobra.Command {
	bf := &benchFlags{}
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load generator: throughput, latency, delayed promotion, the seed stress test, placement, fairness",
		Long: `ax bench measures ax on this machine and prints a summary (-o json for JSON;
--compare FILE for the change against an earlier JSON summary).

It drives a region's task store and the worker runtime directly, as a worker
process does: against a region's Redis (--redis ADDR; the bench's keys live
under --prefix and are removed afterwards) or, by default, a temporary
redis-server it starts itself with appendonly no, save "" and
maxmemory-policy noeviction (no persistence: the summary says so);
--cluster N starts a temporary N-master Redis Cluster like it instead, with
the store on N shards.

See docs/benchmarks.md for the figures of record and how to compare ax
with another Redis queue fairly.`,
	}
	pf := c.PersistentFlags()
	pf.StringVar(&bf.target.Addr, "redis", "", "a region's Redis (host:port); empty: start a temporary redis-server")
	pf.StringVar(&bf.target.Password, "redis-password", "", "password of --redis")
	pf.StringVar(&bf.target.RedisServer, "redis-server", "redis-server", "redis-server binary to start when --redis is empty")
	pf.IntVar(&bf.target.Cluster, "cluster", 0, "start a temporary Redis Cluster of this many masters (≥ 3, formed with redis-cli) instead of one redis-server, the store on as many shards")
	pf.StringVar(&bf.target.Region, "region", "bench", "region name written into the bench's task ids")
	pf.StringVar(&bf.target.Prefix, "prefix", "axbench", "key prefix of the bench's keys (never a live region's prefix)")
	pf.StringVar(&bf.target.Pool, "pool", "bench", "pool the bench submits to and its workers serve")
	pf.StringVar(&bf.target.AOF, "aof", "", "the temporary Redis with the append-only file on and this appendfsync policy (everysec: how users run it; always); empty: no persistence")
	pf.BoolVar(&bf.target.Keep, "keep", false, "leave the bench's keys in --redis after the run")
	pf.BoolVar(&bf.target.EvalSHA, "evalsha", false, "run the store's scripts with EVALSHA even where Redis has Functions (the A/B of FCALL)")
	pf.BoolVar(&bf.target.NoSweeper, "no-sweeper", false, "run without the stand-in for the region leader's sweep: every success then takes a TTL (the path of a region whose leader does not sweep)")
	pf.StringVar(&bf.compare, "compare", "", "print deltas against this earlier JSON summary (-o json output)")
	pf.StringVar(&bf.cpuprofile, "cpuprofile", "", "write a Go CPU profile of the run to this file")
	pf.BoolVar(&bf.verbose, "verbose", false, "log the workers' info messages to stderr")
	pf.IntVar(&bf.workers.Workers, "workers", 2, "in-process workers")
	pf.IntVar(&bf.workers.Concurrency, "concurrency", 128, "slots per worker")
	pf.IntVar(&bf.workers.ClaimBatch, "claim-batch", 0, "most tasks one claim takes (0: the worker default)")
	c.AddCommand(newBenchThroughputCmd(bf), newBenchLatencyCmd(bf), newBenchDelayedCmd(bf),
		newBenchStressCmd(bf), newBenchPlacementCmd(bf), newBenchFairnessCmd(bf), newBenchAPICmd(bf), newBenchCostSimCmd(bf), newBenchCompareCmd(bf))
	return c
}

// benchRun opens the target (unless the mode needs no Redis), runs the
// mode with a progress bar on a terminal's stderr, and prints the summary.
func benchRun(cmd *cobra.Command, bf *benchFlags, needsRedis bool, run func(context.Context, *bench.Env, bench.Progress) (*bench.Summary, error)) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	asJSON, err := benchJSON(cmd)
	if err != nil {
		return err
	}
	var prev *bench.Summary
	if bf.compare != "" {
		if prev, err = bench.ReadSummary(bf.compare); err != nil {
			return err
		}
	}
	level := slog.LevelError
	if bf.verbose {
		level = slog.LevelInfo
	}
	bf.target.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var env *bench.Env
	if needsRedis {
		env, err = bench.Open(ctx, bf.target)
		if err != nil {
			return err
		}
		defer env.Close()
		persist := "appendonly no"
		if bf.target.AOF != "" {
			persist = "appendonly yes, appendfsync " + bf.target.AOF
		}
		switch {
		case env.Clustered():
			fmt.Fprintf(stderr, "ax bench: started a temporary Redis Cluster on %s (%s, save \"\", maxmemory-policy noeviction)\n", env.Addr(), persist)
		case env.Managed():
			fmt.Fprintf(stderr, "ax bench: started a temporary redis-server on %s (%s, save \"\", maxmemory-policy noeviction)\n", env.Addr(), persist)
		}
	}
	if bf.cpuprofile != "" {
		f, err := os.Create(bf.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	bar := newBenchBar(stderr)
	sum, err := run(ctx, env, bar.update)
	bar.finish()
	if err != nil {
		return err
	}
	if asJSON {
		if err := sum.WriteJSON(stdout); err != nil {
			return err
		}
		if prev != nil {
			// Deltas go to stderr so stdout stays one JSON document.
			bench.WriteCompare(stderr, prev, sum)
		}
		return nil
	}
	sum.WriteText(stdout)
	if prev != nil {
		bench.WriteCompare(stdout, prev, sum)
	}
	return nil
}

func benchJSON(cmd *cobra.Command) (bool, error) {
	out, _ := cmd.Flags().GetString("output")
	switch out {
	case "json":
		return true, nil
	case "table", "text", "":
		return false, nil
	}
	return false, fmt.Errorf("--output %q: want table or json", out)
}

// benchBar draws one progress line per phase on a terminal, nothing
// elsewhere.
type benchBar struct {
	w     io.Writer
	tty   bool
	phase string
	bar   *progress.Bar
}

func newBenchBar(w io.Writer) *benchBar { return &benchBar{w: w, tty: progress.IsTerminal(w)} }

func (b *benchBar) update(phase string, done, total int) {
	if !b.tty {
		return
	}
	if phase != b.phase {
		b.finish()
		b.phase, b.bar = phase, progress.New(b.w, fmt.Sprintf("%-13s", phase))
	}
	b.bar.Update(done, total)
}

func (b *benchBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
		b.bar = nil
	}
}

func newBenchThroughputCmd(bf *benchFlags) *cobra.Command {
	var o bench.ThroughputOptions
	c := &cobra.Command{
		Use:   "throughput",
		Short: "No-op tasks: submit rates (one per call, batched), drain rate, submit-while-draining rate, CPU of ax and Redis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.WorkerOptions = bf.workers
			if cmd.Flags().Changed("api") {
				o.API, _ = cmd.Flags().GetString("api")
				o.APIToken, _ = cmd.Flags().GetString("token")
			}
			return benchRun(cmd, bf, true, func(ctx context.Context, e *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.Throughput(ctx, e, o, p)
			})
		},
	}
	f := c.Flags()
	f.IntVarP(&o.N, "tasks", "n", 200000, "tasks per drain phase (the run submits 2×N)")
	f.IntVar(&o.Single, "single", 20000, "of the first N, tasks submitted one per call")
	f.IntVar(&o.SingleConns, "single-conns", 16, "goroutines submitting one task per call")
	f.IntVar(&o.Batch, "batch", 1000, "tasks per batched submit")
	f.IntVar(&o.Submitters, "submitters", 2, "goroutines submitting batches")
	f.IntVar(&o.APITasks, "api-tasks", 10000, "with --api: tasks submitted through the API per mode (one per request, batched)")
	return c
}

func newBenchFairnessCmd(bf *benchFlags) *cobra.Command {
	var o bench.FairnessOptions
	c := &cobra.Command{
		Use:   "fairness",
		Short: "Noisy neighbour: tenant A floods, tenant B submits at a low rate; B's wait and Redis µs/task without and with fair share",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.WorkerOptions = bf.workers
			return benchRun(cmd, bf, true, func(ctx context.Context, e *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.Fairness(ctx, e, o, p)
			})
		},
	}
	f := c.Flags()
	f.IntVar(&o.Flood, "flood", 200000, "tenant A's tasks, queued before the workers start")
	f.Float64Var(&o.Rate, "rate", 10, "tenant B's tasks/s while A's drain")
	f.BoolVar(&o.OnFirst, "on-first", false, "run the phase with a fair share first (the second phase runs after the first's drain: swap to tell order from the fair claim)")
	return c
}

func newBenchLatencyCmd(bf *benchFlags) *cobra.Command {
	var o bench.LatencyOptions
	c := &cobra.Command{
		Use:   "latency",
		Short: "Open-loop submission at a fixed rate: ready→start and submit→done p50/p99/max, idle pickup",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.WorkerOptions = bf.workers
			return benchRun(cmd, bf, true, func(ctx context.Context, e *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.Latency(ctx, e, o, p)
			})
		},
	}
	f := c.Flags()
	f.Float64Var(&o.Rate, "rate", 0, "tasks/s (0: half of a quick peak measurement, 5000 if that fails)")
	f.IntVar(&o.PeakTasks, "peak-tasks", 30000, "tasks submitted and drained at full speed to measure the peak when --rate is 0")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "length of the open-loop phase")
	f.DurationVar(&o.Tick, "tick", time.Millisecond, "pacing step: the tasks due in one step go out in one submit call")
	f.IntVar(&o.Idle, "idle", 10, "idle-worker pickups measured at the end")
	return c
}

func newBenchDelayedCmd(bf *benchFlags) *cobra.Command {
	var o delayed.Options
	var cold bool
	var co delayed.ColdOptions
	c := &cobra.Command{
		Use:   "delayed",
		Short: "Many delayed tasks due at the same second, promoted in bounded batches: rate, lateness, longest script",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, bf, true, func(ctx context.Context, e *bench.Env, p bench.Progress) (*bench.Summary, error) {
				if cold {
					co.N, co.Batch, co.Submitters = o.N, o.Batch, o.Submitters
					return delayed.Cold(ctx, e, co, p)
				}
				return delayed.Run(ctx, e, o, p)
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&cold, "cold", false, "the cold tier: --tasks waiting, due one after another at --rate/s past --horizon; memory per task, then the leader's cold and promote loops for --window: lateness, longest script")
	f.Float64Var(&co.Rate, "rate", 1000, "with --cold: tasks due per second")
	f.DurationVar(&co.Horizon, "horizon", 30*time.Second, "with --cold: the store's cold horizon")
	f.DurationVar(&co.Window, "window", 30*time.Second, "with --cold: steady promotion measured for this long")
	f.IntVarP(&o.N, "tasks", "n", 1000000, "delayed tasks")
	f.IntVar(&o.Batch, "batch", 1000, "tasks per submit call")
	f.IntVar(&o.Submitters, "submitters", 2, "goroutines submitting")
	f.IntVar(&o.PromoteBatch, "promote-batch", 1000, "most tasks one promote call moves (≤ 1000)")
	f.BoolVar(&o.Unpinned, "unpinned", false, "submit the tasks unplaced, as the API does, so each is placed when due: promote to the due set, read, place (the federation's path; pinned tasks skip the last two)")
	f.DurationVar(&o.Lead, "lead", 0, "from the start of submission to the due time (0: N ÷ 40000/s + 3s)")
	return c
}

func newBenchStressCmd(bf *benchFlags) *cobra.Command {
	var o bench.StressOptions
	c := &cobra.Command{
		Use:   "seed-stress",
		Short: "The seed's stress test on this machine: tenants, random durations, transient failures, retries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.WorkerOptions = bf.workers
			// This mode's own defaults: more slots, as handlers sleep.
			if !cmd.Flags().Changed("workers") {
				o.Workers = 4
			}
			if !cmd.Flags().Changed("concurrency") {
				o.Concurrency = 256
			}
			return benchRun(cmd, bf, true, func(ctx context.Context, e *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.Stress(ctx, e, o, p)
			})
		},
	}
	f := c.Flags()
	f.IntVarP(&o.N, "tasks", "n", 500000, "tasks")
	f.IntVar(&o.Tenants, "tenants", 10, "tenants, one submitting goroutine each")
	f.IntVar(&o.Batch, "batch", 100, "tasks per submit call")
	f.DurationVar(&o.MaxDuration, "max-duration", 20*time.Millisecond, "handler durations are uniform in [0, this)")
	f.Float64Var(&o.FailRate, "fail-rate", 0.05, "share of attempts that fail with a retryable error")
	f.DurationVar(&o.RetryBase, "retry-base", 50*time.Millisecond, "retry backoff base (cap and max retries stay the defaults)")
	return c
}

func newBenchPlacementCmd(bf *benchFlags) *cobra.Command {
	var o bench.PlacementOptions
	c := &cobra.Command{
		Use:   "placement",
		Short: "Placement decisions per second over 10, 100 and 1000 pools (no Redis)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, bf, false, func(ctx context.Context, _ *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.Placement(ctx, o, p)
			})
		},
	}
	f := c.Flags()
	f.IntSliceVar(&o.Pools, "pools", []int{10, 100, 1000}, "pool counts to measure")
	f.DurationVar(&o.Duration, "duration", 2*time.Second, "measuring time per pool count")
	return c
}

func newBenchAPICmd(bf *benchFlags) *cobra.Command {
	var o api.Options
	var handoffOnly, localOnly, withTLS bool
	c := &cobra.Command{
		Use:   "api",
		Short: "Through real ax server and ax worker processes (auth on): single and batched POSTs, one region and a hand-off to a second",
		Long: `ax bench api starts an embedded etcd, one redis-server per region, one
ax server per region and --workers ax worker processes (this binary), with
auth on, and submits no-op tasks through the HTTP API while the workers
drain them: one task per request over --conns keep-alive connections, then
batches. Mode "local" is one region; mode "handoff" is two regions, every
task submitted to the first and handed off to the second, which runs it.
Figures: accepted/s, done/s, submit→start p50/p99 (one task in
--sample-every), CPU of the servers and workers per task (/proc/<pid>/stat)
and Redis per task (INFO cpu, commandstats).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			o.Exe, o.RedisServer, o.AOF = exe, bf.target.RedisServer, bf.target.AOF
			o.Workers, o.Concurrency = bf.workers.Workers, bf.workers.Concurrency
			switch {
			case handoffOnly && localOnly:
				return fmt.Errorf("--local and --handoff: choose one (neither runs both)")
			case handoffOnly:
				o.Modes = []string{"handoff"}
			case localOnly:
				o.Modes = []string{"local"}
			default:
				o.Modes = []string{"local", "handoff"}
			}
			if withTLS {
				// Each mode plain, then with TLS, in the same run.
				var ms []string
				for _, m := range o.Modes {
					ms = append(ms, m, m+"-tls")
				}
				o.Modes = ms
			}
			o.Etcd = server.StartEtcd
			return benchRun(cmd, bf, false, func(ctx context.Context, _ *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return api.Run(ctx, o, p)
			})
		},
	}
	f := c.Flags()
	f.IntVar(&o.Single, "single", 20000, "tasks submitted one per request")
	f.IntVar(&o.Conns, "conns", 16, "keep-alive connections submitting one task per request")
	f.IntVar(&o.Batched, "batched", 100000, "tasks submitted in batches")
	f.IntVar(&o.Batch, "batch", 1000, "tasks per POST /v1/tasks/batch (≤ 1000)")
	f.IntVar(&o.BatchConns, "batch-conns", 2, "connections submitting batches")
	f.IntVar(&o.SampleEvery, "sample-every", 10, "one task in this many has its submit→start read back")
	f.StringVar(&o.Logs, "logs", "", "a directory: each ax process's output as <region>-<process>.log (the bench keeps only the tail of each otherwise)")
	f.StringVar(&o.ServerProfile, "server-profile", "", "a directory: a CPU profile of each ax server over each phase's first 5 s, as <mode>-<phase>-<region>.prof")
	f.BoolVar(&localOnly, "local-only", false, "only the one-region mode (mode \"local\")")
	f.BoolVar(&handoffOnly, "handoff", false, "only the two-region hand-off mode")
	f.BoolVar(&withTLS, "tls", false, "run each mode again with TLS on every hop (API and hand-off over https, Redis over TLS), right after it")
	return c
}

func newBenchCostSimCmd(bf *benchFlags) *cobra.Command {
	var o bench.CostSimOptions
	c := &cobra.Command{
		Use:   "cost-sim",
		Short: "A simulated day of cost-aware placement: ax vs round-robin, cheapest list price, greedy hindsight (no Redis)",
		Long: `ax bench cost-sim replays a seeded, simulated day (discrete events on a
simulated clock: seconds of CPU) across three regions priced from
shared/data/prices.csv: nightly ETL peaks, a GPU inference pool lending 7 of
8 GPUs at night, spot price swings, a spot pool 4x slower per task, one
region failing for an hour. The ax policy is the real placement package fed
the figures regions publish (learnt run times, drain rates, stale windows).
Same seed, same output. --svg DIR draws cost and queue depth over the day.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, bf, false, func(ctx context.Context, _ *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return bench.CostSim(ctx, o, p)
			})
		},
	}
	f := c.Flags()
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the day's arrivals and run times")
	f.StringSliceVar(&o.Policies, "policies", nil, "policies to run (default all: ax, ax-fill-only, round-robin, cheapest-list-price, greedy-hindsight)")
	f.StringVar(&o.SVGDir, "svg", "", "write cost-sim-cost.svg, cost-sim-queue.svg and cost-sim-queue-ax.svg into this directory")
	return c
}

func newBenchCompareCmd(bf *benchFlags) *cobra.Command {
	var o peers.Options
	c := &cobra.Command{
		Use:   "compare",
		Short: "ax vs asynq, BullMQ and River in the same minutes: interleaved rounds of drain and submit+drain, medians and ratios",
		Long: `ax bench compare runs ax bench throughput (this binary) and the other
queues' bench programs of internal/bench/compare interleaved — round 1: ax,
asynq, BullMQ, River, River with a 1 ms fetch cooldown; round 2: the same… —
each on a temporary Redis (or PostgreSQL) of its own, sequentially, and
prints every run with the load average before it, the medians, and the
median of the per-round ratios of ax to each.

It needs an ax source tree (the tools are built from it: run it there or
pass --dir): go for asynq and River, node for BullMQ (npm ci from the npm
registry the first time), PostgreSQL for River. A tool whose prerequisite
is missing is left out with a note. --aof everysec gives every Redis an
append-only file (River's PostgreSQL fsync on, synchronous_commit off);
--aof none,everysec runs every tool both ways in each round, back to back,
names the second run tool@everysec, compares it with ax@everysec, and adds
a table of each tool's figures with the AOF ÷ without it, same round.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			o.Exe, o.RedisServer, o.AOF = exe, bf.target.RedisServer, bf.target.AOF
			o.Workers, o.Concurrency = bf.workers.Workers, bf.workers.Concurrency
			return benchRun(cmd, bf, false, func(ctx context.Context, _ *bench.Env, p bench.Progress) (*bench.Summary, error) {
				return peers.Run(ctx, o, p)
			})
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.Tools, "tools", nil, "tools to run each round, in order (default all that can run here: ax, asynq, bullmq, river, river-1ms)")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds of every tool")
	f.IntVarP(&o.N, "tasks", "n", 100000, "tasks per drain phase")
	f.IntVar(&o.Single, "single", 0, "of the first N, tasks submitted one per call (0: N/10, at most 20 000)")
	f.StringVar(&o.Dir, "dir", "", "internal/bench/compare of an ax source tree (default: found from the working directory upwards)")
	f.StringVar(&o.RawDir, "raw", "", "write every run's JSON summary into this directory")
	return c
}
