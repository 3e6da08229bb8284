package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/server"
	"github.com/spf13/cobra"
)

func newServerCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "server --config FILE",
		Short: "Run an ax server for one region: its cell (leader or standby), the federation, the HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(file, loadOptions(cmd.Root()))
			if err == nil {
				err = cfg.ValidateServer()
			}
			if err != nil {
				return usageErr(err)
			}
			log := server.NewLogger(slog.LevelInfo)
			warnIgnoredEnv(log, cfg)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// SIGHUP reloads the API tokens; it never ends the server.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			s, err := server.Start(ctx, cfg, nil, nil, log)
			if err != nil {
				return err
			}
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						s.ReloadFile(file)
					}
				}
			}()
			return s.Run(ctx)
		},
	}
	c.Flags().StringVar(&file, "config", "", "region config file (YAML)")
	_ = c.MarkFlagRequired("config")
	return c
}

func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }
