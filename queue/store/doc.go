// Package store assembles a region's task store: one queue engine and the
// stage types over it, each handed to the caller that needs it.
package store
