// Package dlqcli replays dead letters chosen by a filter (ax dlq replay
// --type/--tenant/--region/--since): the dead letters of every region that
// match, newest first, each replayed once.
package dlqcli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
)

// MaxDefault is how many dead letters one replay by filter takes at most
// when --max is not given.
const MaxDefault = 1000

// Filter chooses dead letters: those of Type, Tenant and Region (empty:
// any) that failed at Since or later (zero: any time), at most Max.
type Filter struct {
	Type, Tenant, Region string
	Since                time.Time
	Max                  int
}

// ParseSince reads --since: a duration back from now ("90m", "24h") or an
// RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--since %s: want a positive duration or an RFC 3339 time", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration back from now (90m, 24h) or an RFC 3339 time (2026-12-07T10:00:00Z)", s)
	}
	return t, nil
}

// Matching lists the dead letters f chooses, newest first, page by page
// (the listing's order is the failure time, so it stops at the first
// older than f.Since). more is true when more than f.Max matched; the
// regions that did not answer are in unavailable (their dead letters are
// not listed).
func Matching(ctx context.Context, api *client.Client, f Filter) (ids []string, more bool, unavailable []string, err error) {
	cursor := ""
	for {
		page, err := api.DeadLetters(ctx, client.DeadLetterFilter{Type: f.Type, Tenant: f.Tenant, Region: f.Region, Limit: 500, Cursor: cursor})
		if err != nil {
			return nil, false, nil, err
		}
		for _, u := range page.Unavailable {
			if !slices.Contains(unavailable, u) {
				unavailable = append(unavailable, u)
			}
		}
		for _, t := range page.Tasks {
			if !f.Since.IsZero() && t.FinishedAt != nil && t.FinishedAt.Before(f.Since) {
				return ids, false, unavailable, nil
			}
			if len(ids) == f.Max {
				return ids, true, unavailable, nil
			}
			ids = append(ids, t.ID)
		}
		if page.NextCursor == "" || len(page.Tasks) == 0 {
			return ids, false, unavailable, nil
		}
		cursor = page.NextCursor
	}
}

// ReplayMatching replays the dead letters f chooses (with dry, lists them
// and replays none): a line each on Stdout (-o json: one list), a count and
// each failure on Stderr. It fails when one was not replayed or a region
// did not answer (after printing the rest).
func ReplayMatching(ctx context.Context, env *cli.Env, f Filter, dry bool) error {
	ids, more, unavailable, err := Matching(ctx, env.API, f)
	if err != nil {
		return err
	}
	if more {
		fmt.Fprintf(env.Stderr, "ax: more than %d dead letters match; these are the newest %d (raise --max for more)\n", f.Max, f.Max)
	}
	var failed error
	if dry {
		err = env.Show(ids, func(w *tabwriter.Writer) {
			for _, id := range ids {
				fmt.Fprintf(w, "%s\twould be replayed\n", id)
			}
		})
	} else {
		done := Replay(ctx, env.API, ids, env.Stderr)
		err = env.Show(done, func(w *tabwriter.Writer) {
			for _, r := range done {
				fmt.Fprintf(w, "%s\t%s\treplayed\n", r.ID, r.State)
			}
		})
		fmt.Fprintf(env.Stderr, "replayed %d of %d\n", len(done), len(ids))
		if len(done) < len(ids) {
			failed = fmt.Errorf("%d of %d dead letters were not replayed", len(ids)-len(done), len(ids))
		}
	}
	switch {
	case err != nil:
		return err
	case failed != nil:
		return failed
	}
	return render.Partial(unavailable)
}

// Replay replays each of ids once, writing a line to w for each one it
// could not replay; it returns the replayed ones' answers.
func Replay(ctx context.Context, api *client.Client, ids []string, w io.Writer) []*apiv1.TaskUpdate {
	var done []*apiv1.TaskUpdate
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		res, err := api.Replay(ctx, id)
		if err != nil {
			fmt.Fprintf(w, "ax: %s: %s\n", id, strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		done = append(done, res)
	}
	return done
}
