// Package region is a region cell: every ax server of a region runs one and
// exactly one leads, elected through the regional etcd.
//
// While it leads, the cell promotes due tasks (sleeping until the next due
// time the promote script returns, or until woken), places due tasks through
// a Placer, reaps expired leases, forgets dead workers, sweeps old dead
// letters and publishes the region's pool figures to the global etcd under a
// lease. Every leader-only Redis write carries the term's fencing token; a
// write rejected by the fence ends the term at once (the standby that fenced
// it is already leading).
//
// The cell does not need the global etcd to schedule its own work: if the
// global etcd is unreachable it keeps promoting, placing (on its last known
// view, or locally) and reaping, and reports GlobalHealthy false.
//
// Shutdown order (Run's ctx cancelled): the leader loops stop, the term's
// registration is closed (its key deleted), the term is resigned, the
// session revoked; then Run returns.
package region
