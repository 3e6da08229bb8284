package fanout

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/queue/read"
	"github.com/ax-sched/ax/task"
)

// Config of a server's reader.
type Config struct {
	Region  string      // this server's region
	Regions []string    // every region of the federation (config regions:)
	Store   *read.Tasks // this region's tasks
	Peer    *peer.Client
	View    *view.View
	Logger  *slog.Logger
	// Wake tells the region's leader that tasks changed (an action here);
	// nil: nobody to tell.
	Wake func()
}

// Reader follows a task wherever it lives (get, trail, actions) and
// answers the federation-wide listings, bulk actions and cost reports by
// asking every region.
//
// The server that receives a listing or bulk action asks every other
// region's server in parallel — with the cluster token, one hop, and a
// deadline — and merges their answers with its own. A request that arrives
// forwarded (X-Ax-Forwarded > 0) is answered from this region alone, so a
// fan-out never loops. A region that does not answer (not healthy in the
// view, refused, timed out, failed) is named in the answer's "unavailable"
// with its error in "regions", never dropped silently; the answer stays 200
// while at least one region answered, and is 503 (or the one region's own
// error) when none did.
//
// A peer sees the cluster token, an unscoped principal, so the caller's
// tenant travels as an explicit filter (tenant=), which narrows what any
// unscoped principal sees and which a scoped principal cannot widen. The
// caller's name travels as on_behalf_of=, honoured only on cluster-token
// calls, so the trails of tasks cancelled in other regions name the
// operator, not "cluster".
type Reader struct{ cfg Config }

// New is the reader of cfg.
func New(cfg Config) *Reader {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reader{cfg: cfg}
}

func (rd *Reader) wake() {
	if rd.cfg.Wake != nil {
		rd.cfg.Wake()
	}
}

// Unfinished reports whether the task id exists and has not ended, wherever
// it is held. A task no region knows (expired after its retention) has
// finished.
func (rd *Reader) Unfinished(ctx context.Context, id string) (bool, error) {
	t, err := rd.Get(ctx, id, 0)
	switch {
	case errors.Is(err, task.ErrNotFound), peer.NotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return !t.State.Terminal(), nil
}

// CancelTask asks the task id to stop wherever it is held, as by, through
// the task cancel path (Act), from this server as the origin of the call
// (a task is at most one forward away). A task missing or ended already,
// here or in the region that holds it, is not an error.
func (rd *Reader) CancelTask(ctx context.Context, id, by string) error {
	_, err := rd.Act(peer.WithHops(ctx, 0), OpCancel, id, 0, by, 0)
	var te *task.TransitionError
	var pe *peer.Error
	switch {
	case err == nil, errors.Is(err, task.ErrNotFound), errors.As(err, &te):
		return nil
	case errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusConflict):
		return nil // the region that holds it says so: missing, or ended
	}
	return err
}

var _ budget.Spend = (*Reader)(nil)

// TenantSpend is each tenant's spend over the UTC days from..to in every
// region that answered (the cost report grouped by tenant), and the
// regions that did not.
func (rd *Reader) TenantSpend(ctx context.Context, from, to time.Time) (map[string]float64, []string, error) {
	rep, err := rd.Cost(ctx, CostQuery{From: from, To: to, GroupBy: []string{apiv1.CostGroupTenant}}, 0)
	if err != nil {
		return nil, nil, err
	}
	spend := map[string]float64{}
	for _, r := range rep.Rows {
		spend[r.Tenant] += r.SpendUSD
	}
	return spend, rep.Unavailable, nil
}
