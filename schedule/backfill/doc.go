// Package backfill reads backfill and rerun requests: the range of a
// schedule's periods to run (from and to as RFC 3339 times or dates in the
// schedule's zone), the bound on runs at once, and the errors that name
// the field at fault. Package schedule keeps the backfills in the global
// etcd and the federation leader starts their runs.
//
// Boundary: it imports apiv1 and task (field errors) only.
package backfill
