// Package groupflags holds the task spec flags of ax submit and ax explain
// that tie tasks of a tenant together by a key: uniqueness and debounce.
package groupflags
