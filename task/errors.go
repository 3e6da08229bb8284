package task

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FieldError is a validation error that names the offending field.
type FieldError struct {
	Field string
	Msg   string
	// TooLarge: the value is over a size limit (the API answers 413, not
	// 400). Code that moves the error under another field keeps it.
	TooLarge bool
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Under is e named from an enclosing object: field "tags.gpu" under "task"
// is "task.tags.gpu", and an error of the whole value (field "") is "task".
func (e *FieldError) Under(prefix string) *FieldError {
	c := *e
	c.Field = prefix
	if e.Field != "" {
		c.Field += "." + e.Field
	}
	return &c
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Errors every layer shares about a task. Stores wrap them with detail;
// callers test them with errors.Is and the API maps them to HTTP statuses.
var (
	// ErrNotFound: no task with this id in this region (or its record expired).
	ErrNotFound = errors.New("task not found")
	// ErrBadID: the string is not a task id.
	ErrBadID = errors.New("malformed task id")
	// ErrIdempotencyConflict: the idempotency key is in use by a different spec.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different spec")
	// ErrExists: a task with this id is already stored (hand-off receivers
	// accept an id once).
	ErrExists = errors.New("task id already exists")
)

// TransitionError is returned when an operation is illegal in the task's
// current state. Nothing was changed.
type TransitionError struct {
	ID    string
	State State
	Op    string
	// Note, when set, qualifies the state (said after it in parentheses),
	// e.g. "hand-off to eu-west in flight".
	Note string
}

func (e *TransitionError) Error() string {
	if e.Note != "" {
		return fmt.Sprintf("cannot %s task %s in state %s (%s)", e.Op, e.ID, e.State, e.Note)
	}
	return fmt.Sprintf("cannot %s task %s in state %s", e.Op, e.ID, e.State)
}

// CheckRegions refuses allowed regions (a spec's Regions) that name a
// region outside federation, naming regions[i]: such a task would wait
// PENDING forever (or read as unplaceable). Every place that accepts a
// task — a submit, a DAG node, a schedule — checks it the same way.
func CheckRegions(allowed, federation []string) error {
	for i, r := range allowed {
		if !slices.Contains(federation, r) {
			known := slices.Clone(federation)
			slices.Sort(known)
			known = slices.Compact(known) // callers add their own region to the list
			return fieldErr(fmt.Sprintf("regions[%d]", i), "no region %q in the federation (%s)", r, strings.Join(known, ", "))
		}
	}
	return nil
}
