package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/dlqcli"
)

func newDLQCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "Dead letters: tasks that failed for good",
	}
	c.AddCommand(newDLQListCmd(), newDLQReplayCmd())
	return c
}

func newDLQListCmd() *cobra.Command {
	var (
		f        client.DeadLetterFilter
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List dead letters of every region, newest first",
		Long: `List dead letters, newest first, gathered from every region of the
federation by the server you ask (or from --region only). The REGION column
is the region that holds each one. A region that did not answer is named on
stderr and the command exits 1 after printing what the others gave. A
tenant's token lists its own tenant's (--tenant naming another is refused,
403). --region and --tenant are taken from the command line only, never
from AX_* env or the settings file.`,
		Example: `  ax dlq list --type report.generate
  ax dlq list --limit 20 --cursor <next cursor printed by the previous page>`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			if f.Limit < 1 || f.Offset < 0 {
				return cli.Usage("--limit must be at least 1 and --offset not negative")
			}
			if !explicit("region") {
				// An AX_REGION exported for another command must not hide
				// the other regions' dead letters.
				f.Region = ""
			}
			if !explicit("tenant") {
				f.Tenant = ""
			}
			res, err := env.API.DeadLetters(ctx, f)
			if err != nil {
				return err
			}
			err = env.Show(res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREGION\tTYPE\tTENANT\tATTEMPTS\tFAILED\tLAST ERROR")
				for _, t := range res.Tasks {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, render.Or(t.HeldBy), t.Type, render.Or(t.Tenant), t.Attempts,
						render.Time(t.FinishedAt, env.Loc), render.Or(render.Cut(t.LastError, 60)))
				}
			})
			if err != nil {
				return err
			}
			if !env.JSON && res.NextCursor != "" {
				fmt.Fprintf(env.Stderr, "(%d shown; more with --cursor %s)\n", len(res.Tasks), res.NextCursor)
			}
			return env.Partial(res.Regions, res.Unavailable)
		}),
	}
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&f.Type, "type", "", "only tasks of this type")
	c.Flags().StringVar(&f.Tenant, "tenant", "", "only tasks of this tenant")
	c.Flags().StringVar(&f.Region, "region", "", "only dead letters held in this region (default: every region)")
	c.Flags().IntVar(&f.Limit, "limit", 50, "at most this many")
	c.Flags().StringVar(&f.Cursor, "cursor", "", "continue after the previous page (its next cursor)")
	c.Flags().IntVar(&f.Offset, "offset", 0, "skip this many (prefer --cursor)")
	return cliCommand(c)
}

func newDLQReplayCmd() *cobra.Command {
	var (
		f        dlqcli.Filter
		since    string
		all, dry bool
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Put dead letters back to PENDING, to run again: by id, or every one a filter chooses",
		Long: `Replay dead letters: the ids given, or, with no id, the dead letters of
every region that --type, --tenant, --region and --since choose (--all: every
one), newest first, at most --max. --since is a duration back from now (24h)
or an RFC 3339 time. --dry-run lists what would be replayed. Filters are
taken from the command line only, never from AX_* env or the settings file.
A region that did not answer is named and the command exits 1.`,
		Example: `  ax dlq replay 06f1c2d9k3m8q2zx.0.us-east-1
  ax dlq replay --type report.generate --since 2h --dry-run
  ax dlq replay --tenant team-a --region eu-west-1 --max 5000`,
		Args: cobra.ArbitraryArgs,
	}
	c.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		filtered := false
		for _, name := range []string{"type", "tenant", "region", "since", "all", "max", "dry-run"} {
			filtered = filtered || explicit(name)
		}
		if len(args) > 0 {
			if filtered {
				return cli.Usage("give dead letters' ids or a filter (--type, --tenant, --region, --since, --all), not both")
			}
			return replayIDs(ctx, env, args)
		}
		if !explicit("type") && !explicit("tenant") && !explicit("region") && !explicit("since") && !all {
			return cli.Usage("give dead letters' ids, or choose them with --type, --tenant, --region or --since (--all: every dead letter)")
		}
		if !explicit("type") {
			f.Type = ""
		}
		if !explicit("tenant") {
			f.Tenant = ""
		}
		if !explicit("region") {
			f.Region = ""
		}
		var err error
		if f.Since, err = dlqcli.ParseSince(since, time.Now()); err != nil {
			return cli.Usage("%v", err)
		}
		if f.Max < 1 {
			return cli.Usage("--max must be at least 1")
		}
		return dlqcli.ReplayMatching(ctx, env, f, dry)
	})
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&f.Type, "type", "", "replay the dead letters of this type")
	c.Flags().StringVar(&f.Tenant, "tenant", "", "replay this tenant's dead letters")
	c.Flags().StringVar(&f.Region, "region", "", "replay the dead letters held in this region (default: every region)")
	c.Flags().StringVar(&since, "since", "", "replay those that failed since: a duration back from now (24h) or an RFC 3339 time")
	c.Flags().BoolVar(&all, "all", false, "replay every dead letter (with no other filter)")
	c.Flags().IntVar(&f.Max, "max", dlqcli.MaxDefault, "replay at most this many")
	c.Flags().BoolVar(&dry, "dry-run", false, "list the dead letters the filter chooses; replay none")
	return cliCommand(c)
}

func replayIDs(ctx context.Context, env *cli.Env, ids []string) error {
	var done []*apiv1.TaskUpdate
	err := env.Each(ids, func(id string) error {
		res, err := env.API.Replay(ctx, id)
		if err == nil {
			done = append(done, res)
		}
		return err
	})
	if perr := cli.ShowEach(env, done, len(ids), func(w *tabwriter.Writer) {
		for _, r := range done {
			fmt.Fprintf(w, "%s\t%s\treplayed\n", r.ID, r.State)
		}
	}); perr != nil {
		return perr
	}
	return err
}
