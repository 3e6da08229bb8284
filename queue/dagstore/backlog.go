package dagstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/queue"
)

// ReserveBacklog reserves room in tenant's backlog in this region for
// tasks that will be created later with these ids (a DAG run's nodes,
// docs/security.md "max_backlog"), as if they existed: they count from
// now, and a task created with NewTask.Reserved under one of them takes
// its room instead of being counted (or checked) again. Each shard checks
// the ids it will hold against its share of max, ⌈max ÷ shards⌉, with its
// count in one script, so concurrent reservations and submits never pass
// it together. All or nothing: when a shard has no room, the shards
// reserved already give theirs back and the error is queue.ErrBacklogFull.
// UnreserveBacklog gives back the room of ids whose task was never
// created.
func (s *DAGs) ReserveBacklog(ctx context.Context, tenant string, max int, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	capOf := strconv.Itoa((max + s.Shards() - 1) / s.Shards())
	tn := queue.BacklogTenant(tenant)
	var done []string
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.Clock(), "r", tn, capOf)
		for _, id := range sids {
			argv = append(argv, id)
		}
		code, err := s.Run(ctx, s.Client(), dagScripts.backlog, s.KeysWith(shard), argv...).Int()
		if err == nil && code != queue.CodeOK {
			err = fmt.Errorf("%w: %d tasks of tenant %s do not fit in its max_backlog (%d)", queue.ErrBacklogFull, len(ids), tenant, max)
		} else if err != nil {
			err = fmt.Errorf("queue: reserve backlog: %w", err)
		}
		if err != nil {
			if len(done) > 0 {
				_ = s.UnreserveBacklog(context.WithoutCancel(ctx), done)
			}
			return err
		}
		done = append(done, sids...)
	}
	return nil
}

// UnreserveBacklog gives back the backlog room ReserveBacklog reserved for
// ids whose task was not created (a node that never ran, a run that
// ended); ids created already, or never reserved, change nothing, so it
// may run any number of times.
func (s *DAGs) UnreserveBacklog(ctx context.Context, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.Clock(), "u", "", "0")
		for _, id := range sids {
			argv = append(argv, id)
		}
		if err := s.Run(ctx, s.Client(), dagScripts.backlog, s.KeysWith(shard), argv...).Err(); err != nil {
			return fmt.Errorf("queue: give back backlog: %w", err)
		}
	}
	return nil
}

// idsByShard groups ids by the shard that holds them.
func (s *DAGs) idsByShard(ids []string) ([][]string, error) {
	out := make([][]string, s.Shards())
	for _, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			return nil, err
		}
		out[shard] = append(out[shard], id)
	}
	return out, nil
}
