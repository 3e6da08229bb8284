// Package fanout follows a task across regions and asks every region for
// what spans the federation: a task's get, trail and actions wherever it
// is held, the merged listings of tasks and dead letters, bulk cancels and
// cost reports. A request that arrives forwarded is answered from this
// region alone, so a fan-out never loops.
//
// The operator listings and bulk actions that span the federation
// (GET /v1/dlq, POST /v1/tasks/cancel). The server that receives such a
// request asks every other region's server in parallel — with the cluster
// token, one hop, and a deadline — and merges their answers with its own. A
// request that arrives forwarded (X-Ax-Forwarded > 0) is answered from this
// region alone, so a fan-out never loops.
//
// A region that does not answer (not healthy in the view, refused, timed
// out, failed) is named in the answer's "unavailable" with its error in
// "regions"; it is never dropped silently. The answer stays 200 while at
// least one region answered; 503 (or the one region's own error) when none
// did.
//
// Tenancy: a peer sees the cluster token, an unscoped principal, so the
// caller's tenant travels as an explicit filter (tenant=), which narrows
// what any unscoped principal sees and which a scoped principal cannot
// widen. The caller's name travels as on_behalf_of=, honoured only on
// cluster-token calls, so the trails of tasks cancelled in other regions
// name the operator, not "cluster".
package fanout
