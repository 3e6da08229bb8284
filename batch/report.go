package batch

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/batchstore"
	"github.com/ax-sched/ax/task"
)

// Reporter's pace: a pass every ReportInterval (at once again while a
// shard's list held a full read), Recover every RecoverInterval.
const (
	ReportInterval  = 200 * time.Millisecond
	RecoverInterval = 2 * time.Second
	// reportRead is how many ends one pass reads of a shard.
	reportRead = 1000
)

// Loop is the region leader loop of batches: it reports the ends of
// members this region's shards ended to their batches' home regions (and
// those of single-task schedules' tasks to the gates, Config.RunEnded), and
// stores the callbacks still due of this region's batches (Recover). Its
// writes are idempotent, so it needs no fencing: two leaders for a moment
// count each end once and store each callback once.
func (b *Batches) Loop(ctx context.Context, _ queue.Fence, _ func(error)) {
	t := time.NewTicker(ReportInterval)
	defer t.Stop()
	var recovered time.Time
	for {
		full := false
		for shard := range b.store.Shards() {
			more, err := b.reportShard(ctx, shard)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("batch ends not reported yet; trying again", "shard", shard, "err", err)
			}
			full = full || more
		}
		if now := time.Now(); now.Sub(recovered) >= RecoverInterval {
			recovered = now
			if err := b.Recover(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("batch callbacks due not stored yet; trying again", "err", err)
			}
		}
		if full {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportShard reports one read of shard's ends and trims what it
// reported; more says the read was full.
func (b *Batches) reportShard(ctx context.Context, shard int) (more bool, err error) {
	ends, n, err := b.store.Reported(ctx, shard, reportRead)
	if err != nil || n == 0 {
		return false, err
	}
	byRegion := map[string][]batchstore.End{}
	var runs []batchstore.End
	for _, e := range ends {
		if strings.HasPrefix(e.Batch, "s/") {
			runs = append(runs, e)
			continue
		}
		home, err := homeOf(e.Batch)
		if err != nil {
			continue // not a batch id: nothing to report it to
		}
		byRegion[home] = append(byRegion[home], e)
	}
	for home, es := range byRegion {
		if home == b.cfg.Region {
			_, err = b.ApplyEnds(ctx, es)
		} else {
			err = b.send(ctx, home, es)
		}
		if err != nil {
			// Nothing is trimmed: the next pass reports this read again,
			// which counts nothing twice.
			return false, err
		}
	}
	b.runsEnded(ctx, runs)
	return n == reportRead, b.store.Trim(ctx, shard, n)
}

// runsEnded records the ends of single-task schedules' runs, once per
// schedule and read (one end wakes every gate waiting for the schedule).
// A failure is logged, not retried: the gates read their upstreams on a
// slow timer too (package dag), and the batches' ends must not wait for
// the global etcd.
func (b *Batches) runsEnded(ctx context.Context, runs []batchstore.End) {
	if b.cfg.RunEnded == nil {
		return
	}
	seen := map[string]bool{}
	for _, e := range slices.Backward(runs) { // the newest end of each schedule
		tenant, name, period, ok := task.ParseScheduleEnd(e.Batch)
		if !ok || seen[tenant+"/"+name] {
			continue
		}
		seen[tenant+"/"+name] = true
		if err := b.cfg.RunEnded(ctx, tenant, name, period, e.Member, endState(e.Code)); err != nil && ctx.Err() == nil {
			b.log.Warn("schedule run end not recorded; the gates waiting for it read it later", "schedule", name, "tenant", tenant,
				"task", e.Member, "err", err)
		}
	}
}

// endState is a run's state for a task end's code (S, F or C).
func endState(code string) task.DAGState {
	switch code {
	case "S":
		return task.DAGSuccess
	case "F":
		return task.DAGFailed
	}
	return task.DAGCanceled
}

// send reports ends to their batches' home region.
func (b *Batches) send(ctx context.Context, home string, ends []batchstore.End) error {
	req := apiv1.BatchEnds{Ends: make([]apiv1.BatchEnd, len(ends))}
	for i, e := range ends {
		req.Ends[i] = apiv1.BatchEnd{Batch: e.Batch, Member: e.Member, Code: e.Code}
	}
	var resp apiv1.BatchEndsResponse
	return b.tasks.Proxy(ctx, home, http.MethodPost, "/v1/internal/batches/ends", req, &resp)
}

// ApplyEnds counts members' ends in their batches, which live in this
// region, and stores the callbacks of the batches they complete. An end
// of a batch this region does not hold (expired) is dropped.
func (b *Batches) ApplyEnds(ctx context.Context, ends []batchstore.End) (int, error) {
	byBatch := map[string][]batchstore.End{}
	var order []string
	for _, e := range ends {
		if _, ok := byBatch[e.Batch]; !ok {
			order = append(order, e.Batch)
		}
		byBatch[e.Batch] = append(byBatch[e.Batch], e)
	}
	applied := 0
	for _, id := range order {
		ap, err := b.store.Apply(ctx, id, byBatch[id], false)
		if errors.Is(err, batchstore.ErrNotFound) {
			b.log.Debug("ends of a batch not held here dropped", "batch", id, "ends", len(byBatch[id]))
			continue
		}
		if err != nil {
			return applied, err
		}
		applied += ap.Applied
		b.completed(ctx, id, ap)
	}
	return applied, nil
}

// completed stores the callbacks of a batch ap completed, or lets it
// expire when it has none.
func (b *Batches) completed(ctx context.Context, id string, ap batchstore.Applied) {
	switch {
	case !ap.Completed:
	case ap.Callback == batchstore.CallbackDue:
		b.sendCallbacks(ctx, id)
	default:
		if err := b.store.Expire(ctx, id, b.cfg.Retain); err != nil {
			b.log.Warn("completed batch left without expiry", "batch", id, "err", err)
		}
	}
}

// Report is POST /v1/internal/batches/ends: ends another region reported
// for batches of this one (ApplyEnds).
func (b *Batches) Report(ctx context.Context, req *apiv1.BatchEnds) (*apiv1.BatchEndsResponse, error) {
	ends := make([]batchstore.End, 0, len(req.Ends))
	for _, e := range req.Ends {
		ends = append(ends, batchstore.End{Batch: e.Batch, Member: e.Member, Code: e.Code})
	}
	n, err := b.ApplyEnds(ctx, ends)
	if err != nil {
		return nil, err
	}
	return &apiv1.BatchEndsResponse{Applied: n}, nil
}
