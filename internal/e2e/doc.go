// Package e2e runs real ax processes (the binary built from cmd/ax) against
// a real etcd and real redis-servers, and kills them (SIGKILL, SIGSTOP) to
// check failover, fencing and that no accepted task is lost. It holds tests
// only.
//
// The suite mostly waits on timers and processes (about a quarter of a
// core). A test that shares nothing with the others and asserts no rate,
// ratio or latency bound calls t.Parallel: such tests run after the
// sequential ones, -parallel (GOMAXPROCS) at a time. A test whose figures a
// neighbour's load could move (fair shares, rates, bounds in seconds, the
// dashboard's browser) stays sequential.
package e2e
