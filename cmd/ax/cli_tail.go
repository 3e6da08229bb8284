package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/client"
)

// While the server is unreachable, tail retries with backoff from
// tailRetryMin doubling to tailRetryMax, and says so once per outage.
const (
	tailRetryMin = 250 * time.Millisecond
	tailRetryMax = 5 * time.Second
)

func newTailCmd() *cobra.Command {
	var (
		region string
		wait   time.Duration
	)
	c := &cobra.Command{
		Use:   "tail",
		Short: "Follow a region's event stream until Ctrl-C",
		Long: `Follow a region's event stream (one event per scheduling script call:
submit, promote, claim, complete, retry, reap, ...) with a long poll, until
Ctrl-C. Each line: time, op, number of tasks, the first ids. With -o json,
one JSON object per event. --wait is how long each request waits for new
events before it is answered empty and sent again (1s to 1m); a request
for another region's events waits at most 5s there (calls between servers
time out).`,
		Args: cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			if wait < time.Second || wait > cliHeaderTimeout/2 {
				return cliUsage("--wait %s: want between 1s and %s", wait, cliHeaderTimeout/2)
			}
			return tailEvents(ctx, env, region, wait)
		}),
	}
	c.Flags().StringVar(&region, "region", "", "region to follow (default: the server's own)")
	c.Flags().DurationVar(&wait, "wait", 20*time.Second, "how long each request waits for new events (1s to 1m; another region's: at most 5s)")
	return cliCommand(c)
}

func tailEvents(ctx context.Context, env *cliEnv, region string, wait time.Duration) error {
	after := ""
	backoff := tailRetryMin
	down := false
	enc := json.NewEncoder(env.stdout)
	for {
		resp, err := env.api.Events(ctx, region, after, wait)
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		if err != nil {
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && !apiErr.Temporary() {
				return err
			}
			if !down {
				fmt.Fprintf(env.stderr, "ax: %v; retrying\n", err)
				down = true
			}
			d := backoff
			if apiErr != nil && apiErr.RetryAfter > 0 {
				d = apiErr.RetryAfter
			}
			backoff = min(2*backoff, tailRetryMax)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
			continue
		}
		if down {
			fmt.Fprintln(env.stderr, "ax: reconnected")
			down = false
		}
		backoff = tailRetryMin
		for _, e := range resp.Events {
			if env.json {
				if err := enc.Encode(e); err != nil {
					return err
				}
				continue
			}
			render.Event(env.stdout, resp.Region, e, env.loc)
		}
		if resp.Next != "" {
			after = resp.Next
		}
	}
}
