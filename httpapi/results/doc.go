// Package results serves GET /v1/tasks/{id}/result: a task's result, or
// its error once it failed, waiting (a bounded long-poll) until the task
// is terminal, wherever the federation holds it.
package results
