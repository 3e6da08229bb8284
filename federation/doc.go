// Package federation is what every ax server does beyond its own region:
// it keeps the global view of regions and pools (view.go, servers.go: a
// watch on the global etcd), places each submitted task on the cheapest
// healthy pool across regions (node.go, with package placement; inflight.go
// counts its placements the published figures miss), routes keyed submits
// to the key's home region, hands tasks off to other regions through the
// outbox and receives theirs (peer.go), follows a task wherever it lives
// for reads and actions (tasks.go), answers the federation-wide listings
// and bulk actions by asking every region (fanout.go), re-places the work
// of pools that lost their workers (stuck.go), and accepts tasks under
// fixed ids for the packages that derive them (enqueue.go).
//
// Boundary: federation → region → {queue, lease}; placement is pure and
// takes values; task and apiv1 are the model and the wire shapes. Schedules
// (package schedule) and DAG runs (package dag) are built on top: each
// defines the small interface it needs (schedule.Enqueuer, dag.Tasks) and
// *Node implements both (checked in contracts_test.go), so federation
// imports neither. The HTTP API (package httpapi) imports federation; cmd/ax
// wires them all.
//
// At about 3 000 lines of non-test Go (comments and blank lines aside;
// 4 000 with them) it is over the 2 500 the house allows
// without a word: the submission path, the outbox sender, the receiver, the
// stuck-pool loop and the fan-outs all work on one node's state (its view,
// its in-flight placements, its peer client, its store) and one file holds
// each of those jobs; what needs none of that state (schedules, DAG runs,
// the HTTP API) is a package of its own.
package federation
