// Package fedtest is test support for the packages of the federation
// (federation, schedule, dag, httpapi): a federation of three regions on
// real Redis and etcd, each region's server assembled as cmd/ax/runtime.go
// assembles one (Fed), calls to a server's API that check the one error
// shape (Call, Reply), polling (Eventually) and metric reads.
//
// Boundary: it imports federation and httpapi (it assembles servers, as
// cmd/ax does, so it is the one package besides cmd/ax that imports two of
// {federation, schedule, dag, httpapi}; it is imported by tests only), and
// never schedule or dag, so their own tests can use it: they attach what
// they serve (Region.ServeSchedules).
package fedtest
