// Package handlers holds the worker's built-in task handlers (noop, sleep,
// exec, http), registered under the task types of a pool's choice
// (Example). A malformed payload, unknown command or forbidden URL is a
// NonRetryable failure naming the problem: no retry would fix it.
package handlers
