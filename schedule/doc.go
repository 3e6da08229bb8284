// Package schedule runs cron schedules across the federation
// (docs/schedules.md): definitions kept in the global etcd, fired by the
// federation leader into each schedule's home region, each slot enqueued
// once and run at least once.
package schedule
