// Package grid builds a schedule's grid of periods × nodes (GET
// /v1/schedules/{name}/grid, Airflow's grid view): which periods are its
// columns, and what each period's newest run says of each node.
//
// Boundary: it imports apiv1 and task only; package schedule gives it the
// slots, the runs its backfills started and a Reader of runs.
package grid

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Column is one period and its run ids, the slot's own first.
type Column struct {
	Slot time.Time
	IDs  []string
}

// Columns are the newest n periods among slots (each run under slotRun's
// id) and the periods of started (the runs backfills and reruns started),
// oldest first.
func Columns(slots []time.Time, slotRun func(time.Time) string, started []apiv1.BackfillRun, n int) []Column {
	bySlot := map[int64]*Column{}
	add := func(slot time.Time, id string) {
		c := bySlot[slot.Unix()]
		if c == nil {
			c = &Column{Slot: slot, IDs: []string{slotRun(slot)}}
			bySlot[slot.Unix()] = c
		}
		if !slices.Contains(c.IDs, id) {
			c.IDs = append(c.IDs, id)
		}
	}
	for _, slot := range slots {
		add(slot, slotRun(slot))
	}
	for _, run := range started {
		add(run.Period.Start, run.ID)
	}
	cols := make([]Column, 0, len(bySlot))
	for _, c := range bySlot {
		cols = append(cols, *c)
	}
	slices.SortFunc(cols, func(a, b Column) int { return a.Slot.Compare(b.Slot) })
	return cols[max(0, len(cols)-n):]
}

// Reader reads runs wherever they live.
type Reader interface {
	// RunStatus reads a DAG run; nil when no region knows it.
	RunStatus(ctx context.Context, id string) (*apiv1.DAGStatus, error)
	// TaskState reads a task; ok is false when no region knows it.
	TaskState(ctx context.Context, id string) (state task.State, finished *time.Time, ok bool, err error)
}

// parallel bounds the periods read at once.
const parallel = 8

// Periods reads each column's newest existing run (a DAG run when dag,
// else a task, whose one node is nodes[0]) into a period of the grid;
// period is a slot's period. The first error reading a run is returned.
func Periods(ctx context.Context, r Reader, dag bool, nodes []string, cols []Column, period func(time.Time) apiv1.Period) ([]apiv1.GridPeriod, error) {
	out := make([]apiv1.GridPeriod, len(cols))
	errs := make([]error, len(cols))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, c := range cols {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = apiv1.GridPeriod{Period: period(c.Slot), Cells: make([]apiv1.GridCell, len(nodes))}
			errs[i] = read(ctx, r, dag, nodes, c, &out[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// read fills gp from c's runs, newest first: the newest that exists is
// shown, every one that exists is counted.
func read(ctx context.Context, r Reader, dag bool, nodes []string, c Column, gp *apiv1.GridPeriod) error {
	for _, id := range slices.Backward(c.IDs) {
		if !dag {
			st, _, ok, err := r.TaskState(ctx, id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			gp.Runs++
			if gp.RunID == "" {
				gp.RunID, gp.State = id, string(st)
				gp.Cells[0] = apiv1.GridCell{State: string(st), TaskID: id}
			}
			continue
		}
		run, err := r.RunStatus(ctx, id)
		if err != nil {
			return err
		}
		if run == nil {
			continue
		}
		gp.Runs++
		if gp.RunID != "" {
			continue
		}
		gp.RunID, gp.State = id, string(run.State)
		for _, nd := range run.Nodes {
			if i := slices.Index(nodes, nd.ID); i >= 0 {
				gp.Cells[i] = apiv1.GridCell{State: string(nd.State), Reason: nd.Reason}
				if nd.TaskState != "" { // the node has a task
					gp.Cells[i].TaskID = nd.TaskID
				}
			}
		}
	}
	return nil
}
