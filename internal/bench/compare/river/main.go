// Command riverbench measures github.com/riverqueue/river (jobs in
// PostgreSQL) on this machine with the method of `ax bench throughput`
// (docs/benchmarks.md, "Comparing with another queue, fairly"), so the two
// can be compared like for like in the same minutes.
//
// Phases (the names of ax's):
//
//	submit-single  -single jobs, Client.Insert one per call from
//	               -single-conns goroutines
//	submit-batch   the rest of -n in Client.InsertMany calls of -batch from
//	               -submitters goroutines
//	drain          the client starts with -concurrency workers on the
//	               default queue; timed until its own job_completed events
//	               (Client.Subscribe, in process, as ax counts) reach n
//	submit+drain   -n more inserted in batches while it drains; timed until
//	               2×n completed
//	idle pickup    the client idle, one job at a time, 300–700 ms apart:
//	               Insert call → Work start
//
// Per phase: jobs/s, PostgreSQL CPU (/proc of the postmaster and its
// backends) and this process's CPU (getrusage RUSAGE_SELF), both per job.
// Completed jobs are kept (River's default CompletedJobRetentionPeriod is
// 24 h), as ax keeps every task 24 h.
//
// It is its own Go module so that ax's go.mod does not gain River and pgx.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverVersion is the River this module requires (go.mod).
const riverVersion = "v0.51.2"

type options struct {
	n           int
	single      int
	singleConns int
	batch       int
	submitters  int
	concurrency int
	output      string
	dsn         string
	pgBin       string
	durable     bool
	fsync       bool
	idle        int
	cooldown    time.Duration
	pollEvery   time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 200000, "jobs per drain phase (the run inserts 2×N)")
	flag.IntVar(&o.single, "single", 20000, "of the first N, jobs inserted one per call")
	flag.IntVar(&o.singleConns, "single-conns", 16, "goroutines inserting one job per call")
	flag.IntVar(&o.batch, "batch", 1000, "jobs per InsertMany")
	flag.IntVar(&o.submitters, "submitters", 2, "goroutines calling InsertMany")
	flag.IntVar(&o.concurrency, "concurrency", 256, "River QueueConfig.MaxWorkers of the default queue")
	flag.StringVar(&o.output, "o", "table", "output: table or json")
	flag.StringVar(&o.dsn, "pg", "", "use this PostgreSQL (a DSN; its river_job table is truncated) instead of starting a temporary one")
	flag.StringVar(&o.pgBin, "pg-bin", "", "directory of initdb and postgres (default: the newest /usr/lib/postgresql/*/bin, else PATH)")
	flag.BoolVar(&o.durable, "durable", false, "the temporary PostgreSQL with its defaults (fsync on, synchronous_commit on) instead of fsync, synchronous_commit and full_page_writes off")
	flag.BoolVar(&o.fsync, "fsync", false, "the temporary PostgreSQL with fsync and full_page_writes on but synchronous_commit off (commits flushed by the WAL writer within 200 ms: the counterpart of Redis appendfsync everysec)")
	flag.IntVar(&o.idle, "idle", 10, "idle pickups measured at the end")
	flag.DurationVar(&o.cooldown, "fetch-cooldown", river.FetchCooldownDefault, "River Config.FetchCooldown: the least time between two fetches of a queue (River's default 100ms caps a drain at MaxWorkers jobs per cooldown)")
	flag.DurationVar(&o.pollEvery, "fetch-poll-interval", river.FetchPollIntervalDefault, "River Config.FetchPollInterval")
	flag.Parse()
	if o.output != "table" && o.output != "json" {
		fmt.Fprintf(os.Stderr, "riverbench: -o %q: want table or json\n", o.output)
		os.Exit(2)
	}
	o.single = max(0, min(o.single, o.n))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

// Phase is one measured step.
type Phase struct {
	Name       string  `json:"name"`
	Tasks      int     `json:"tasks"`
	WallS      float64 `json:"wall_s"`
	PerS       float64 `json:"tasks_per_s"`
	ProcCPUS   float64 `json:"proc_cpu_s"`
	PgCPUS     float64 `json:"postgres_cpu_s"`
	ProcUsPer  float64 `json:"proc_cpu_us_per_task"`
	PgUsPer    float64 `json:"postgres_cpu_us_per_task"`
	PgWALBytes int64   `json:"postgres_wal_bytes_per_task,omitempty"`
}

// Summary is the -o json document.
type Summary struct {
	Tool     string           `json:"tool"`
	Started  time.Time        `json:"started"`
	TookS    float64          `json:"took_s"`
	Host     Host             `json:"host"`
	Postgres PgInfo           `json:"postgres"`
	Params   map[string]any   `json:"params"`
	Phases   []Phase          `json:"phases"`
	Idle     *Dist            `json:"idle_pickup,omitempty"`
	Counts   map[string]int64 `json:"counts"`
	// BytesPerJob is the growth of river_job (table, indexes, TOAST) per
	// job inserted in submit-batch.
	BytesPerJob float64  `json:"postgres_bytes_per_pending_task"`
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

// PgInfo says which PostgreSQL the run used.
type PgInfo struct {
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

// NoopArgs is the job: 64 B of JSON ({"k":"x…x"}), as ax bench's payload.
type NoopArgs struct {
	K string `json:"k"`
}

func (NoopArgs) Kind() string { return "bench.noop" }

// IdleArgs is the job of the idle pickups.
type IdleArgs struct {
	K string `json:"k"`
}

func (IdleArgs) Kind() string { return "bench.idle" }

type noopWorker struct{ river.WorkerDefaults[NoopArgs] }

func (*noopWorker) Work(context.Context, *river.Job[NoopArgs]) error { return nil }

type idleWorker struct {
	river.WorkerDefaults[IdleArgs]
	mu sync.Mutex
	ch chan time.Time
}

func (w *idleWorker) Work(context.Context, *river.Job[IdleArgs]) error {
	now := time.Now()
	w.mu.Lock()
	ch := w.ch
	w.mu.Unlock()
	if ch != nil {
		ch <- now
	}
	return nil
}

func (w *idleWorker) arm() chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.ch = ch
	w.mu.Unlock()
	return ch
}

var payload = strings.Repeat("x", 56)

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	s := &Summary{Tool: "riverbench (river " + riverVersion + ")", Started: start.UTC(), Host: hostInfo(), Counts: map[string]int64{},
		Params: map[string]any{"n": o.n, "single": o.single, "single_conns": o.singleConns, "batch": o.batch,
			"submitters": o.submitters, "concurrency": o.concurrency, "fetch_cooldown": o.cooldown.String(), "fetch_poll_interval": o.pollEvery.String(), "payload_bytes": len(`{"k":""}`) + len(payload)}}

	dsn := o.dsn
	var pg *pgServer
	if dsn == "" {
		var err error
		if pg, err = startPostgres(o.pgBin, o.durable, o.fsync); err != nil {
			return err
		}
		defer pg.stop()
		dsn = pg.dsn
		s.Postgres.Managed = true
		s.Postgres.Addr = pg.addr
		s.Postgres.Config = "temporary: " + pg.config
		fmt.Fprintf(os.Stderr, "riverbench: started a temporary PostgreSQL on %s (%s)\n", pg.addr, pg.config)
	} else {
		s.Postgres.Config = "external (river_job truncated)"
		s.Postgres.Addr = dsn
	}
	pool, err := pgxpool.New(ctx, dsn+" pool_max_conns="+strconv.Itoa(o.singleConns+o.submitters+8))
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&s.Postgres.Version); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	mig, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	idle := &idleWorker{}
	river.AddWorker(workers, idle)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.concurrency}},
		Workers:           workers,
		FetchCooldown:     o.cooldown,
		FetchPollInterval: o.pollEvery,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}, ChanSize: 1 << 16})
	defer cancelSub()
	var completed, failed atomic.Int64
	go func() {
		for ev := range events {
			if ev.Kind == river.EventKindJobCompleted {
				completed.Add(1)
			} else {
				failed.Add(1)
			}
		}
	}()

	meter := func() *pgMeter { return startMeter(ctx, pg, pool) }
	args := NoopArgs{K: payload}

	// 1. One job per call.
	m := meter()
	if err := insertSingles(ctx, client, args, o.single, o.singleConns); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if o.single > 0 {
		s.Phases = append(s.Phases, m.stop(ctx, "submit-single", o.single))
	}

	// 2. Batches.
	bulk := func(n int) error { return insertMany(ctx, client, args, n, o.batch, o.submitters) }
	size0 := tableBytes(ctx, pool)
	m = meter()
	if err := bulk(o.n - o.single); err != nil {
		return fmt.Errorf("insert many: %w", err)
	}
	if o.n > o.single {
		s.Phases = append(s.Phases, m.stop(ctx, "submit-batch", o.n-o.single))
		s.BytesPerJob = round(float64(tableBytes(ctx, pool)-size0)/float64(o.n-o.single), 1)
	}

	// 3. Drain.
	m = meter()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	if err := await(ctx, "drain", int64(o.n), &completed); err != nil {
		return err
	}
	s.Phases = append(s.Phases, m.stop(ctx, "drain", o.n))

	// 4. Submit while draining.
	m = meter()
	subErr := make(chan error, 1)
	go func() { subErr <- bulk(o.n) }()
	if err := await(ctx, "submit+drain", int64(2*o.n), &completed); err != nil {
		return err
	}
	if err := <-subErr; err != nil {
		return fmt.Errorf("insert many: %w", err)
	}
	s.Phases = append(s.Phases, m.stop(ctx, "submit+drain", o.n))

	// 5. Idle pickups.
	picks, err := idlePickups(ctx, client, idle, o.idle)
	if err != nil {
		return err
	}
	if len(picks) > 0 {
		s.Idle = dist(picks)
		fmt.Fprintf(os.Stderr, "riverbench: idle pickup p50 %.1f ms, max %.1f ms\n", s.Idle.P50Ms, s.Idle.MaxMs)
	}
	want := int64(2*o.n + len(picks))
	for deadline := time.Now().Add(5 * time.Second); completed.Load() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := countJobs(ctx, pool, s.Counts); err != nil {
		return err
	}
	s.Counts["enqueued"] = want
	s.Counts["completed_events"] = completed.Load()
	s.Counts["failed_events"] = failed.Load()
	if s.Counts["river_job_completed"] != want || failed.Load() != 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("completed %d, failed %d: expected %d and 0", s.Counts["river_job_completed"], failed.Load(), want))
	}
	s.Notes = append(s.Notes, fmt.Sprintf("FetchCooldown %s, FetchPollInterval %s (River's defaults: 100ms, 1s); completions batched by River's completer", o.cooldown, o.pollEvery))

	return write(s, o, start)
}

// write notes the load the run shared the machine with and prints the summary.
func write(s *Summary, o options, start time.Time) error {
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

// insertSingles inserts n jobs one per call from conns goroutines.
func insertSingles(ctx context.Context, client *river.Client[pgx.Tx], args NoopArgs, n, conns int) error {
	var next atomic.Int64
	return parallel(ctx, conns, func() (bool, error) {
		if next.Add(1) > int64(n) {
			return false, nil
		}
		_, err := client.Insert(ctx, args, nil)
		return true, err
	})
}

// insertMany inserts n jobs in calls of batch from conns goroutines.
func insertMany(ctx context.Context, client *river.Client[pgx.Tx], args NoopArgs, n, batch, conns int) error {
	var left atomic.Int64
	left.Store(int64(n))
	params := make([]river.InsertManyParams, batch)
	for i := range params {
		params[i] = river.InsertManyParams{Args: args}
	}
	return parallel(ctx, conns, func() (bool, error) {
		k := int64(batch)
		rest := left.Add(-k)
		if rest <= -k {
			return false, nil
		}
		if rest < 0 {
			k += rest
		}
		_, err := client.InsertMany(ctx, params[:k])
		return true, err
	})
}

// idlePickups inserts n idle jobs one at a time after the workers found the
// queue empty, each after a pause of 300-700 ms, and returns how long each
// took to reach Work.
func idlePickups(ctx context.Context, client *river.Client[pgx.Tx], idle *idleWorker, n int) ([]time.Duration, error) {
	var picks []time.Duration
	for i := range n {
		select {
		case <-time.After(time.Duration(300+100*(i%5)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		ch := idle.arm()
		t0 := time.Now()
		if _, err := client.Insert(ctx, IdleArgs{K: payload}, nil); err != nil {
			return nil, fmt.Errorf("idle insert: %w", err)
		}
		select {
		case t1 := <-ch:
			picks = append(picks, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, errors.New("idle pickup: no Work start within 10s")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return picks, nil
}

// countJobs adds River's own count of jobs by state to counts.
func countJobs(ctx context.Context, pool *pgxpool.Pool, counts map[string]int64) error {
	rows, err := pool.Query(ctx, "SELECT state::text, count(*) FROM river_job GROUP BY state")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var c int64
		if err := rows.Scan(&st, &c); err != nil {
			return err
		}
		counts["river_job_"+st] = c
	}
	return rows.Err()
}

// parallel runs conns goroutines calling f until it returns false or an
// error.
func parallel(ctx context.Context, conns int, f func() (bool, error)) error {
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for range max(1, conns) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				more, err := f()
				if err != nil {
					errc <- err
					return
				}
				if !more {
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

// await waits until n reaches total; it gives up when n does not move for
// 30s.
func await(ctx context.Context, what string, total int64, n *atomic.Int64) error {
	t := time.NewTicker(time.Millisecond) // as ax bench polls its counter
	defer t.Stop()
	last, lastMove := int64(-1), time.Now()
	for {
		c := n.Load()
		if c >= total {
			return nil
		}
		if c != last {
			last, lastMove = c, time.Now()
		} else if time.Since(lastMove) > 30*time.Second {
			return fmt.Errorf("%s: no progress for 30s at %d of %d", what, c, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func tableBytes(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	_ = pool.QueryRow(ctx, "SELECT pg_total_relation_size('river_job')").Scan(&n)
	return n
}

// pgMeter measures one phase.
type pgMeter struct {
	pg    *pgServer
	pool  *pgxpool.Pool
	start time.Time
	proc  time.Duration
	pgCPU time.Duration
	wal   int64
}

func startMeter(ctx context.Context, pg *pgServer, pool *pgxpool.Pool) *pgMeter {
	m := &pgMeter{pg: pg, pool: pool, start: time.Now(), proc: processCPU(), wal: walLSN(ctx, pool)}
	if pg != nil {
		m.pgCPU = treeCPU(pg.pid())
	}
	return m
}

func (m *pgMeter) stop(ctx context.Context, name string, tasks int) Phase {
	wall := time.Since(m.start)
	proc := processCPU() - m.proc
	var pgc time.Duration
	if m.pg != nil {
		pgc = treeCPU(m.pg.pid()) - m.pgCPU
	}
	p := Phase{Name: name, Tasks: tasks, WallS: round(wall.Seconds(), 3), ProcCPUS: round(proc.Seconds(), 3), PgCPUS: round(pgc.Seconds(), 3)}
	if wall > 0 {
		p.PerS = round(float64(tasks)/wall.Seconds(), 1)
	}
	if tasks > 0 {
		p.ProcUsPer = round(float64(proc.Microseconds())/float64(tasks), 2)
		p.PgUsPer = round(float64(pgc.Microseconds())/float64(tasks), 2)
		p.PgWALBytes = (walLSN(ctx, m.pool) - m.wal) / int64(tasks)
	}
	fmt.Fprintf(os.Stderr, "riverbench: %-13s %8.0f jobs/s  postgres %6.2f µs/job  proc %6.2f µs/job\n", name, p.PerS, p.PgUsPer, p.ProcUsPer)
	return p
}

// walLSN is the current WAL position in bytes.
func walLSN(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	_ = pool.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&n)
	return n
}

// processCPU is this process's CPU time (user + system, all threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// treeCPU is the CPU of the postmaster, of its live children (backends,
// the WAL writer, the checkpointer…) and of its exited children that it
// reaped, from /proc.
func treeCPU(pid int) time.Duration {
	const tick = time.Second / 100 // USER_HZ
	var ticks int64
	stat := func(p int) (ppid int, self, children int64, ok bool) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			return 0, 0, 0, false
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b)[i+2:])
		// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
		if len(f) < 15 {
			return 0, 0, 0, false
		}
		ppid, _ = strconv.Atoi(f[1])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		cu, _ := strconv.ParseInt(f[13], 10, 64)
		cs, _ := strconv.ParseInt(f[14], 10, 64)
		return ppid, u + s, cu + cs, true
	}
	if _, self, ch, ok := stat(pid); ok {
		ticks += self + ch
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if ppid, self, _, ok := stat(p); ok && ppid == pid {
			ticks += self
		}
	}
	return time.Duration(ticks) * tick
}

// pgServer is a temporary PostgreSQL child process.
type pgServer struct {
	addr, dsn, dir, config string
	cmd                    *exec.Cmd
	done                   chan struct{}
}

func (s *pgServer) pid() int { return s.cmd.Process.Pid }

func pgBinDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(ms) > 0 {
		sort.Slice(ms, func(i, j int) bool { return versionOf(ms[i]) > versionOf(ms[j]) })
		return filepath.Dir(ms[0]), nil
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("initdb not found (install postgresql, or pass -pg-bin DIR or -pg DSN): %w", err)
	}
	return filepath.Dir(p), nil
}

func versionOf(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return v
}

// startPostgres runs initdb in a temporary directory and starts postgres on
// a free port of 127.0.0.1 (as user postgres when this runs as root, which
// postgres refuses).
func startPostgres(binDir string, durable, fsync bool) (*pgServer, error) {
	bin, err := pgBinDir(binDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "riverbench-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and there is no user postgres to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(string(out)))
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf := []string{"listen_addresses=127.0.0.1", "max_connections=200", "shared_buffers=256MB", "unix_socket_directories=" + dir}
	cfg := "PostgreSQL defaults (fsync on, synchronous_commit on), shared_buffers 256MB"
	switch {
	case durable:
	case fsync:
		conf = append(conf, "synchronous_commit=off")
		cfg = "fsync on, full_page_writes on, synchronous_commit off (WAL flushed within 200 ms, like appendfsync everysec), shared_buffers 256MB"
	default:
		conf = append(conf, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
		cfg = "fsync off, synchronous_commit off, full_page_writes off (no durability, like Redis without AOF), shared_buffers 256MB"
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port)}
	for _, c := range conf {
		args = append(args, "-c", c)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	if cred != nil {
		_ = os.Chown(logf.Name(), int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (Ctrl-C reaches only us; we stop it), and it
	// dies with this process even if we are killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &pgServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{}), config: cfg,
		dsn: fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)}
	go func() { _ = cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-s.done:
			b, _ := os.ReadFile(logf.Name())
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited: %s", lastLines(string(b)))
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond); err == nil {
			_ = c.Close()
			// Accepting connections is not ready: wait for the startup
			// to finish (pg_isready's answer).
			if exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port)).Run() == nil {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New("postgres did not become ready within 20s")
}

func (s *pgServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	_ = os.RemoveAll(s.dir)
}

func lastLines(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-3):], " | ")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func writeText(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "%s, %s\n", s.Tool, s.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "host: %d CPUs %s, %s, %s; load %.2f before, %.2f after\n", s.Host.CPUs, s.Host.Model, s.Host.OS, s.Host.GoVersion, s.Host.Load1, s.Host.Load1End)
	fmt.Fprintf(w, "postgres: %s %s (%s)\n", s.Postgres.Version, s.Postgres.Addr, s.Postgres.Config)
	fmt.Fprintf(w, "params: n=%v single=%v batch=%v submitters=%v concurrency=%v fetch_cooldown=%v\n\n", s.Params["n"], s.Params["single"], s.Params["batch"], s.Params["submitters"], s.Params["concurrency"], s.Params["fetch_cooldown"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttasks\twall s\ttasks/s\tpostgres cpu s\tproc cpu s\tpostgres µs/task\tproc µs/task\tWAL B/task\t")
	for _, p := range s.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", p.Name, p.Tasks, p.WallS, p.PerS, p.PgCPUS, p.ProcCPUS, p.PgUsPer, p.ProcUsPer, p.PgWALBytes)
	}
	tw.Flush()
	if s.Idle != nil {
		fmt.Fprintf(w, "\nidle pickup (insert → Work start, %d): p50 %.1f ms, max %.1f ms, min %.1f ms\n", s.Idle.N, s.Idle.P50Ms, s.Idle.MaxMs, s.Idle.MinMs)
	}
	fmt.Fprintf(w, "postgres bytes per pending job (river_job with indexes): %.0f B\n", s.BytesPerJob)
	keys := make([]string, 0, len(s.Counts))
	for k := range s.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var cs []string
	for _, k := range keys {
		cs = append(cs, fmt.Sprintf("%s=%d", k, s.Counts[k]))
	}
	fmt.Fprintf(w, "counts: %s\n", strings.Join(cs, " "))
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
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
