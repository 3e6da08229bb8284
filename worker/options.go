package worker

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options; zero values take them.
const (
	DefaultClaimBatch      = 32
	DefaultHeartbeat       = queue.HeartbeatDefault
	DefaultShutdownGrace   = 30 * time.Second
	DefaultIdleWait        = time.Second
	DefaultPreemptDelayMin = 60 * time.Second
	DefaultPreemptDelayMax = 120 * time.Second
)

// Completions are acknowledged in batches: a batch goes out when ackBatch
// successes are queued or ackDelay after the first, whichever is first.
// 2ms costs a handler nothing noticeable and turns thousands of round trips
// a second into tens.
const (
	ackBatch = 32
	ackDelay = 2 * time.Millisecond
)

// callTimeout bounds every Redis call but the idle wait (which has its own).
const callTimeout = 5 * time.Second

// Options configure a Worker.
type Options struct {
	// Pool is the pool this worker serves (required).
	Pool string
	// ID names the worker in the store and in logs; default host-pid.
	ID string
	// Concurrency is the number of slots: handlers running at once
	// (default runtime.NumCPU()).
	Concurrency int
	// TypeConcurrency gives task types slots of their own, taken out of
	// Concurrency: a type listed runs in at most that many slots and the
	// other types share the rest, each pool claimed on its own, so
	// handlers of one type that all block (a hung upstream) never stall
	// the others. Each must be > 0 and together less than Concurrency.
	// The heartbeat still publishes Concurrency slots and every served
	// type; with HandleAny the shared slots claim every type, those with
	// slots of their own included.
	TypeConcurrency map[string]int
	// ClaimBatch bounds the tasks taken by one claim (default 32, a
	// remote Source's remote.DefaultClaimBatch; at most queue.MaxBatch).
	ClaimBatch int
	// Heartbeat is the interval of lease renewal (default 3s). It must be
	// shorter than the store's lease; a third of it leaves room for two
	// missed beats.
	Heartbeat time.Duration
	// ShutdownGrace is how long running handlers may take to finish once
	// Run's context ends (default 30s; negative: none).
	ShutdownGrace time.Duration
	// IdleWait is the safety timeout of the idle wait for new work, in
	// whole seconds (default and minimum 1s). A wake-up normally comes long
	// before; it also bounds how long an idle worker takes to shut down.
	IdleWait time.Duration
	// A preempted task is given back for a random delay in
	// [PreemptDelayMin, PreemptDelayMax] (default 60s–120s), so a burst of
	// preemptions does not come back at once.
	PreemptDelayMin, PreemptDelayMax time.Duration
	// PricePerSlotHour is recorded on every task at claim, for cost reports.
	PricePerSlotHour float64
	// MaxResultBytes is the region's result limit (its results.max_bytes;
	// default task.DefaultMaxResultBytes, at most task.MaxResultBytes): a
	// success whose result is longer fails for good with reason
	// RESULT_TOO_LARGE instead of being recorded.
	MaxResultBytes int
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider receives a span per attempt ("ax.run"), a child of the
	// task's submit span (internal/tracing); the handler's ctx carries it,
	// so a handler's own spans and outgoing requests join the task's trace.
	// nil records none.
	TracerProvider trace.TracerProvider
	// OnFinish, when set, is called once per claimed task after its outcome
	// is recorded, with the state the store moved it to (SUCCESS; PENDING
	// for a retry or a delayed give-back; READY; FAILED; CANCELED), or ""
	// when the lease was lost and the outcome belongs to another worker.
	// runtime is the handler's run time; t.Price × runtime is its cost.
	// It runs on the worker's own goroutines: keep it short.
	OnFinish func(t *Task, state task.State, runtime time.Duration)
	// Metrics, when set, receives the worker's figures (NewMetrics): one
	// Metrics for every worker of a region in the process.
	Metrics *Metrics
}

func (o *Options) withDefaults(lease time.Duration) error {
	if o.Pool == "" {
		return fmt.Errorf("worker: Options.Pool is required")
	}
	if o.ID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "worker"
		}
		o.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Concurrency < 0 {
		return fmt.Errorf("worker: Options.Concurrency %d must not be negative", o.Concurrency)
	}
	if o.Concurrency == 0 {
		o.Concurrency = runtime.NumCPU()
	}
	if len(o.TypeConcurrency) > 0 {
		own, sum := make(map[string]int, len(o.TypeConcurrency)), 0
		for t, n := range o.TypeConcurrency {
			if err := task.CheckType(t); err != nil {
				return fmt.Errorf("worker: Options.TypeConcurrency: %w", err)
			}
			if n <= 0 {
				return fmt.Errorf("worker: Options.TypeConcurrency[%q] %d must be > 0", t, n)
			}
			own[t] = n
			sum += n
		}
		if sum >= o.Concurrency {
			return fmt.Errorf("worker: Options.TypeConcurrency takes %d slots, leaving none of Concurrency %d for the other types", sum, o.Concurrency)
		}
		o.TypeConcurrency = own
	}
	if o.ClaimBatch < 0 {
		return fmt.Errorf("worker: Options.ClaimBatch %d must not be negative", o.ClaimBatch)
	}
	if o.ClaimBatch == 0 {
		o.ClaimBatch = DefaultClaimBatch
	}
	o.ClaimBatch = min(o.ClaimBatch, queue.MaxBatch)
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Heartbeat >= lease {
		return fmt.Errorf("worker: Options.Heartbeat %v must be shorter than the store's lease %v", o.Heartbeat, lease)
	}
	switch {
	case o.ShutdownGrace == 0:
		o.ShutdownGrace = DefaultShutdownGrace
	case o.ShutdownGrace < 0:
		o.ShutdownGrace = 0
	}
	if o.IdleWait <= 0 {
		o.IdleWait = DefaultIdleWait
	}
	// Blocking pops count whole seconds (go-redis truncates to them).
	o.IdleWait = max(o.IdleWait.Truncate(time.Second), time.Second)
	if o.PreemptDelayMin <= 0 {
		o.PreemptDelayMin = DefaultPreemptDelayMin
	}
	if o.PreemptDelayMax <= 0 {
		o.PreemptDelayMax = max(DefaultPreemptDelayMax, o.PreemptDelayMin)
	}
	if o.PreemptDelayMax < o.PreemptDelayMin {
		return fmt.Errorf("worker: Options.PreemptDelayMax %v is below PreemptDelayMin %v", o.PreemptDelayMax, o.PreemptDelayMin)
	}
	if o.PricePerSlotHour < 0 {
		return fmt.Errorf("worker: Options.PricePerSlotHour %v must not be negative", o.PricePerSlotHour)
	}
	if o.MaxResultBytes < 0 || o.MaxResultBytes > task.MaxResultBytes {
		return fmt.Errorf("worker: Options.MaxResultBytes %d must be 0 (default) to %d", o.MaxResultBytes, task.MaxResultBytes)
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = task.DefaultMaxResultBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}
