// Package task is ax's task model, with no storage and no network: the spec a
// client submits (Spec, its strict decoding and its validation with the
// region's Defaults), the stored view of a task (Task, Transition, Event),
// ids (IDGen, ParseID: an id names its home region and shard), the states and
// reason codes, the transition table every store script follows (Legal), and
// the error sentinels that every layer shares (ErrNotFound, FieldError, …).
//
// It imports nothing of ax and no Redis client, so the HTTP client, the wire
// types (apiv1) and worker SDK users compile without a database driver.
// queue stores these values in Redis; federation, httpapi, client and worker
// pass them around.
package task
