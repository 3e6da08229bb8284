package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// orphanSkew is how far the clocks of the region's servers and Redis may
// disagree: a task started this long before a lost claim began may still
// be that claim's.
const orphanSkew = 2 * time.Second

// Again finds the tasks a claim for w took whose answer was lost, so they
// can be handed out again under their leases: of ids, those still RUNNING
// under w; with ids nil, the tasks of w's pool RUNNING under w, started
// since about since, that holds reports w does not hold (the server that
// ran the claim died between the store's claim and recording its tasks).
// That search reads the region's running tasks: a cost paid only after a
// server died within a store claim.
func (p *Proxy) Again(ctx context.Context, w Worker, ids []string, since time.Time, holds func(id string) bool) ([]*task.Task, error) {
	if ids == nil {
		var err error
		if ids, err = p.orphans(ctx, w, since, holds); err != nil {
			return nil, err
		}
	}
	var out []*task.Task
	for _, id := range ids {
		t, err := p.tasks.Get(ctx, id)
		switch {
		case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrBadID):
			continue
		case err != nil:
			return nil, err
		}
		if t.State == task.Running && t.Worker == w.ID {
			out = append(out, t)
		}
	}
	return out, nil
}

func (p *Proxy) orphans(ctx context.Context, w Worker, since time.Time, holds func(string) bool) ([]string, error) {
	ids := []string{}
	q := queue.ListQuery{State: task.Running, Pool: w.Pool, Limit: queue.MaxList}
	for {
		ts, more, err := p.tasks.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Worker == w.ID && !holds(t.ID) && t.StartedAt != nil && !t.StartedAt.Before(since.Add(-orphanSkew)) {
				ids = append(ids, t.ID)
			}
		}
		if !more || len(ts) == 0 {
			return ids, nil
		}
		q.Before = ts[len(ts)-1].ID
	}
}
