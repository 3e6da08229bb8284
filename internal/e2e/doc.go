// Package e2e runs real ax processes (the binary built from cmd/ax) against
// a real etcd and real redis-servers, and kills them (SIGKILL, SIGSTOP) to
// check failover, fencing and that no accepted task is lost. It holds tests
// only.
package e2e
