// Package schedule runs cron schedules across the federation
// (docs/architecture.md §5): definitions kept in the global etcd, fired by
// the federation leader into each schedule's home region.
//
//   - <prefix>schedules/<name> holds the definition (apiv1.Schedule),
//     written through the API; only pause and resume change it after
//     creation.
//   - <prefix>schedule-state/<name> holds the last slot handled (fired or
//     skipped, State), written only by the federation leader in a
//     transaction that compares its election key, so a deposed leader
//     cannot move it.
//   - <prefix>schedule-ends/<tenant>/<name> holds the last end of a DAG
//     run the schedule started, written by the run's home region: every
//     region watches it to wake the gates waiting for it (package
//     schedule/ends).
//   - A slot's task id is derived from (schedule, slot) (TaskID): the
//     leader enqueues the task into the schedule's home region first and
//     records the slot second, so a leader that dies in between makes its
//     successor enqueue the same id again, which the store refuses
//     (task.ErrExists). Each slot is enqueued once and runs at least once.
//
// The cron syntax is robfig/cron/v3's with a seconds field first
// ("*/10 * * * * *"); five-field expressions (no seconds) and the
// descriptors @yearly, @monthly, @weekly, @daily, @hourly are accepted too.
// "@every D" fires at the multiples of D since the Unix epoch, so every
// leader computes the same slots.
//
// Boundary: schedule reaches tasks only through Enqueuer, a small
// interface the federation implements (federation.Node); it imports lease
// (the election), task (the task model) and apiv1 (the wire shapes), never
// federation or httpapi. The HTTP API serves it through an interface of
// its own (httpapi.Schedules) that *Scheduler implements; cmd/ax wires the
// two. Errors a caller sees are *apiv1.Error (conflict, not found,
// unavailable) or *task.FieldError, so the API maps them without
// importing this package.
package schedule
