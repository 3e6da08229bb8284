// Package tracing links the spans of one task across servers, regions and
// workers without carrying span context in the task: a task's trace id is
// its trace_id (the submitter's W3C trace, or one derived from the task id),
// and its submit span has a span id derived from the task id. Every later
// span of the task — the hand-off send and receive, each run on a worker —
// is a child of that span, rebuilt from the task alone (TaskContext), in
// whichever process handles it.
//
// Sampling is decided by the trace id (a ratio), so every process makes the
// same decision for a task without talking to the others.
package tracing
