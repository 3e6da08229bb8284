package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/server"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
	"github.com/spf13/cobra"
)

func newWorkerCmd() *cobra.Command {
	var file, pool, id, metricsAddr, api, token, tokenFile string
	var concurrency int
	var typeConcurrency map[string]int
	c := &cobra.Command{
		Use:   "worker (--config FILE | --api URL[,URL] --token T) --pool P",
		Short: "Run a worker for one pool of a region, with the built-in handlers (noop, sleep, exec, http)",
		Long: `Run a worker for one pool of a region, with the built-in handlers (noop, sleep, exec, http).

A direct worker (--config) claims from the region's Redis: the fast path, for
pools the platform runs. A remote worker (--api, or AX_API_URL) holds only the
URLs of the region's servers and a worker token (--token, AX_WORKER_TOKEN,
--token-file or AX_WORKER_TOKEN_FILE) and speaks the API's worker protocol; it
needs no Redis settings, and --config then only configures its handlers
(worker.exec, worker.http). See docs/workers.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything reads a secret: the commands it runs must
			// not find them in /proc (handlers.SealProcess).
			forget, err := handlers.SealProcess()
			if err != nil {
				return err
			}
			rw, err := remoteSettings(api, token, tokenFile)
			if err == nil && rw != nil && len(typeConcurrency) > 0 {
				err = fmt.Errorf("--type-concurrency: a remote worker's claims cannot name types; run a direct worker (--config) for types with slots of their own")
			}
			if err != nil {
				forget()
				return usageErr(err)
			}
			if rw != nil && file == "" {
				forget()
				rw.Pool, rw.ID, rw.Concurrency = pool, id, concurrency
				return runRemote(cmd, *rw, nil, metricsAddr)
			}
			if rw == nil && file == "" {
				forget()
				return usageErr(fmt.Errorf("ax worker needs --config FILE (a direct worker) or --api URL with a worker token (a remote worker)"))
			}
			// A worker never calls another server: it does not take the
			// cluster token (nor the API tokens), so that nothing it runs
			// can find them in its memory or environment. It keeps the API
			// tokens' SHA-256 only: its --metrics checks them as a server's
			// /metrics does.
			_ = os.Unsetenv(config.EnvPrefix + "_AUTH_CLUSTER_TOKEN")
			cfg, err := config.Load(file, loadOptions(cmd.Root()))
			forget()
			if err != nil {
				return usageErr(err)
			}
			tokens := make([]config.Token, len(cfg.Auth.Tokens))
			for i, t := range cfg.Auth.Tokens {
				tokens[i] = config.Token{Name: t.Name, TokenSHA256: t.TokenSHA256, Role: t.Role, Tenant: t.Tenant, ExpiresAt: t.ExpiresAt}
			}
			cfg.Auth = config.Auth{Enabled: cfg.Auth.Enabled, Tokens: tokens, FailuresPerMinute: cfg.Auth.FailuresPerMinute}
			if rw != nil {
				rw.Pool, rw.ID, rw.Concurrency = pool, id, concurrency
				return runRemote(cmd, *rw, cfg, metricsAddr)
			}
			p, ok := cfg.Pool(pool)
			if !ok {
				return usageErr(fmt.Errorf("%s: pools: no pool %q (have %s)", file, pool, server.PoolNames(cfg)))
			}
			if concurrency > 0 {
				cfg.Worker.Concurrency = concurrency
			}
			if len(typeConcurrency) > 0 {
				cfg.Worker.Types = map[string]config.WorkerType{}
				own := 0
				for t, n := range typeConcurrency {
					if err := task.CheckType(t); err != nil || n < 1 {
						return usageErr(fmt.Errorf("--type-concurrency %s=%d: want a task type and slots ≥ 1", t, n))
					}
					cfg.Worker.Types[t] = config.WorkerType{Concurrency: n}
					own += n
				}
				if own >= cfg.Worker.Concurrency {
					return usageErr(fmt.Errorf("--type-concurrency: %d slots leave none of the worker's %d for the other types", own, cfg.Worker.Concurrency))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := server.NewLogger(slog.LevelInfo)
			warnIgnoredEnv(log, cfg)
			// SIGHUP (sent to every ax process to reload the servers, or
			// a closed terminal) ended the worker at once, its running
			// tasks left to expire and spend a retry each. It has nothing
			// to reload: it says so and keeps running.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						log.Warn("SIGHUP: ax worker reloads nothing (restart it to apply a new config); still running", "pool", p.Name)
					}
				}
			}()
			var m *worker.Metrics
			if metricsAddr != "" {
				reg := server.NewRegistry()
				m = server.WorkerMetrics(cfg, reg)
				srv, err := server.ServeMetrics(metricsAddr, reg, cfg, log)
				if err != nil {
					return err
				}
				defer srv.Close()
			}
			return server.RunWorker(ctx, cfg, p, id, m, log)
		},
	}
	c.Flags().StringVar(&file, "config", "", "region config file (YAML)")
	c.Flags().StringVar(&pool, "pool", "", "pool to serve")
	c.Flags().StringVar(&id, "id", "", "worker id (default host-pid)")
	c.Flags().IntVar(&concurrency, "concurrency", 0, "slots (default worker.concurrency from the config)")
	c.Flags().StringToIntVar(&typeConcurrency, "type-concurrency", nil,
		"task types' own slots, taken out of --concurrency, e.g. sleep=4,http=2 (default worker.types from the config)")
	c.Flags().StringVar(&metricsAddr, "metrics", "", "serve the worker's Prometheus metrics (schedule latency, wait, outcomes, cost) on this address, e.g. :9101")
	c.Flags().StringVar(&api, "api", "", "remote worker: the region's server URLs, comma-separated, tried in turn (or AX_API_URL)")
	c.Flags().StringVar(&token, "token", "", "remote worker: its worker token (or AX_WORKER_TOKEN)")
	c.Flags().StringVar(&tokenFile, "token-file", "", "remote worker: a file holding its worker token (or AX_WORKER_TOKEN_FILE)")
	_ = c.MarkFlagRequired("pool")
	return c
}

// remoteSettings reads a remote worker's URLs and token from the flags or
// the environment; nil when no API URL is given (a direct worker).
func remoteSettings(api, token, tokenFile string) (*server.RemoteWorker, error) {
	api = cmp.Or(api, os.Getenv(config.EnvPrefix+"_API_URL"))
	if api == "" {
		return nil, nil
	}
	var urls []string
	for _, u := range strings.Split(api, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	token = cmp.Or(token, os.Getenv(config.EnvPrefix+"_WORKER_TOKEN"))
	tokenFile = cmp.Or(tokenFile, os.Getenv(config.EnvPrefix+"_WORKER_TOKEN_FILE"))
	if token == "" && tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, fmt.Errorf("--api %s: a remote worker needs its worker token (--token, AX_WORKER_TOKEN, --token-file or AX_WORKER_TOKEN_FILE)", api)
	}
	return &server.RemoteWorker{URLs: urls, Token: token}, nil
}

// runRemote runs a remote worker until SIGINT or SIGTERM; cfg (may be
// nil) configures its handlers.
func runRemote(cmd *cobra.Command, rw server.RemoteWorker, cfg *config.Region, metricsAddr string) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := server.NewLogger(slog.LevelInfo)
	rw.Config = cfg
	// As a direct worker: SIGHUP reloads nothing and must not end it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Warn("SIGHUP: ax worker reloads nothing (restart it to apply new settings); still running", "pool", rw.Pool)
			}
		}
	}()
	if metricsAddr != "" {
		if cfg == nil {
			return usageErr(fmt.Errorf("--metrics: a remote worker serves metrics only with --config (its auth section guards them)"))
		}
		reg := server.NewRegistry()
		rw.Metrics = server.WorkerMetrics(cfg, reg)
		srv, err := server.ServeMetrics(metricsAddr, reg, cfg, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	return server.RunRemoteWorker(ctx, rw, log)
}
