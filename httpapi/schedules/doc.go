// Package schedules serves /v1/schedules through the Scheduler interface
// *schedule.Scheduler implements, with the submit checks a schedule's task
// gets (tenant, quota, backlog, budget).
package schedules
