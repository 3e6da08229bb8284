// Package tailcli holds ax tail: one region's event stream, or every
// region's merged, followed with long polls until Ctrl-C. The CLI's root
// (package main) gives it its environment through Env.
package tailcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"github.com/ax-sched/ax/task"
	"github.com/spf13/cobra"
)

// While a region's stream is unreachable, tail retries it with backoff from
// RetryMin doubling to RetryMax (or the server's Retry-After), and says so
// once per outage.
const (
	RetryMin = 250 * time.Millisecond
	RetryMax = 5 * time.Second
	// rediscover is how often tail over every region looks for regions
	// that joined since it started.
	rediscover = 30 * time.Second
)

// Command is ax tail.
func Command() *cobra.Command {
	var (
		region string
		wait   time.Duration
	)
	c := &cobra.Command{
		Use:   "tail",
		Short: "Follow every region's event stream (or one region's) until Ctrl-C",
		Long: `Follow the event streams (one event per scheduling script call: submit,
promote, claim, complete, retry, reap, ...) of every region of the
federation, merged as they arrive, or of --region only, with long polls,
until Ctrl-C. Each line: the time (RFC 3339 with milliseconds), the region,
the op, the number of tasks, the first ids. With -o json, one JSON object
per event with its region. A region that does not answer is named once on
stderr and retried (and named again when it is back); regions that join
later are followed within 30s. --wait is how long each request waits for
new events before it is answered empty and sent again (1s to 1m); a request
for another region's events waits at most 5s there.`,
		Example: `  ax tail
  ax tail --region eu-west-1 -o json`,
		Args: cobra.NoArgs,
	}
	c.RunE = cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
		if wait < time.Second || wait > cli.MaxWait {
			return cli.Usage("--wait %s: want between 1s and %s", wait, cli.MaxWait)
		}
		t := &tail{env: env, wait: wait, enc: json.NewEncoder(env.Stdout)}
		if region != "" {
			return t.follow(ctx, region)
		}
		return t.every(ctx)
	})
	c.Flags().StringVar(&region, "region", "", "follow this region only (default: every region)")
	c.Flags().DurationVar(&wait, "wait", 20*time.Second, "how long each request waits for new events (1s to 1m; another region's: at most 5s)")
	return c
}

// tail prints the events of one or more regions' streams, one line (or
// JSON object) at a time.
type tail struct {
	env  *cli.Env
	wait time.Duration
	mu   sync.Mutex // one event's line at a time
	enc  *json.Encoder
}

// every follows each region the server's view lists, and the ones that
// join later, until ctx ends or one stream fails for good.
func (t *tail) every(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	var followed []string
	for {
		names, err := t.regions(ctx)
		if ctx.Err() != nil {
			return t.end(ctx)
		}
		if err != nil && len(followed) == 0 {
			return err // no stream to follow yet: the first look decides
		}
		for _, n := range names {
			if slices.Contains(followed, n) {
				continue
			}
			followed = append(followed, n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := t.follow(ctx, n); err != nil {
					cancel(fmt.Errorf("region %s: %w", n, err))
				}
			}()
		}
		select {
		case <-ctx.Done():
			return t.end(ctx)
		case <-time.After(rediscover):
		}
	}
}

// end is every's outcome once ctx has ended: a stream's failure, or nil
// for Ctrl-C.
func (t *tail) end(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// regions are the names of the regions the server's view lists.
func (t *tail) regions(ctx context.Context) ([]string, error) {
	rs, err := t.env.API.Regions(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rs.Regions {
		names = append(names, r.Name)
	}
	return names, nil
}

// follow prints region's events until ctx ends (nil) or the server refuses
// the stream for good (a 4xx other than 429: the error).
func (t *tail) follow(ctx context.Context, region string) error {
	after := ""
	backoff := RetryMin
	down := false
	for {
		resp, err := t.env.API.Events(ctx, region, after, t.wait)
		if ctx.Err() != nil {
			return nil // Ctrl-C, or another stream failed
		}
		if err != nil {
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && !apiErr.Temporary() {
				return err
			}
			if !down {
				t.say("ax: %s: %v; retrying\n", region, err)
				down = true
			}
			d := backoff
			if apiErr != nil && apiErr.RetryAfter > 0 {
				d = apiErr.RetryAfter
			}
			backoff = min(2*backoff, RetryMax)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
			continue
		}
		if down {
			t.say("ax: %s: reconnected\n", region)
			down = false
		}
		backoff = RetryMin
		if err := t.print(resp); err != nil {
			return err
		}
		if resp.Next != "" {
			after = resp.Next
		}
	}
}

// print writes resp's events, each whole.
func (t *tail) print(resp *apiv1.EventsResponse) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range resp.Events {
		if t.env.JSON {
			if err := t.enc.Encode(struct {
				Region string `json:"region"`
				task.Event
			}{resp.Region, e}); err != nil {
				return err
			}
			continue
		}
		render.Event(t.env.Stdout, resp.Region, e, t.env.Loc)
	}
	return nil
}

func (t *tail) say(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.env.Stderr, format, args...)
}
