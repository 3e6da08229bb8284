// Package fedtest is test support for the packages of the federation
// (federation, schedule, dag, httpapi): a federation of three regions on
// real Redis and etcd, each region's server assembled as cmd/ax/runtime.go
// assembles one (Fed), calls to a server's API that check the one error
// shape (Call, Reply), polling (Eventually) and metric reads.
//
// Boundary: of {federation, schedule, dag, httpapi} it imports federation
// only; a server's HTTP API comes from the caller (New's API argument).
// Package fedapi (below this one) passes httpapi's, with the harness's
// tokens, and serves schedules when a test attaches a scheduler. Both are
// imported by tests only.
package fedtest
