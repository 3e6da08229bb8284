// Package depend checks the dependencies between schedules
// (apiv1.ScheduleDependency) that a schedule's DAG nodes declare: their
// shape and defaults (Check), that every upstream is a schedule of the
// tenant and no cycle runs through the new schedule (CheckUpstreams). It
// holds no state and does no I/O; package schedule resolves dependencies
// into task.Gate values when it starts a run, and package dag opens them.
package depend
