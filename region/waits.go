package region

import (
	"context"
	"slices"
	"time"

	"github.com/ax-sched/ax/queue/read"
)

// Bounds of the ready→start sample (waitWindow).
const (
	waitSpan      = time.Minute // the window a published p99 covers
	waitKeep      = 4096        // observations kept, newest first out last
	waitPerRead   = 256         // claim events read per shard and look
	waitMinSample = 5           // fewer observations in the window: no figure
)

// waitWindow is the leader's sample of its region's ready→start waits:
// the tasks named by the claim events of the last waitSpan (a claim event
// names up to 8 of its tasks), read on every figures look from where the
// previous look stopped. Owned by the publisher's loop.
type waitWindow struct {
	after []string // event stream ids per shard; nil: from the next look on
	obs   []waitObs
}

type waitObs struct {
	at   time.Time
	pool string
	wait time.Duration
}

type startsReader interface {
	RecentStarts(ctx context.Context, after []string, max int) ([]read.Start, []string, error)
}

// look reads the waits of the tasks claimed since the previous look and
// drops what fell out of the window. An error leaves the window as it was.
func (w *waitWindow) look(ctx context.Context, r startsReader, now time.Time) error {
	starts, next, err := r.RecentStarts(ctx, w.after, waitPerRead)
	if err != nil {
		return err
	}
	w.after = next
	for _, s := range starts {
		w.obs = append(w.obs, waitObs{at: now, pool: s.Pool, wait: s.Wait})
	}
	cut := 0
	for cut < len(w.obs) && (now.Sub(w.obs[cut].at) > waitSpan || len(w.obs)-cut > waitKeep) {
		cut++
	}
	w.obs = slices.Delete(w.obs, 0, cut)
	return nil
}

// p99 is pool's 99th percentile wait over the window in seconds (nearest
// rank), and whether the window holds enough observations to say.
func (w *waitWindow) p99(pool string) (float64, bool) {
	var ws []time.Duration
	for _, o := range w.obs {
		if o.pool == pool {
			ws = append(ws, o.wait)
		}
	}
	if len(ws) < waitMinSample {
		return 0, false
	}
	slices.Sort(ws)
	i := (len(ws)*99 + 99) / 100 // ⌈0.99 n⌉, 1-based
	return ws[i-1].Seconds(), true
}
