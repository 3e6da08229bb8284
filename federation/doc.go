// Package federation is what every ax server does beyond its own region:
// it keeps the global view of regions and pools (a watch on the global
// etcd), places each submitted task on the cheapest healthy pool across
// regions (package placement), routes keyed submits to the key's home
// region, hands tasks off to other regions through an outbox, forwards
// reads and cancels to wherever a task lives, and serves the HTTP API.
//
// Imports point one way: federation → region → {queue, lease}; placement is
// pure and takes values.
package federation
