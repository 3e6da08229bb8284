package testenv

import "testing"

// Slow marks a test that is slow by nature: it starts and kills several
// processes, or waits out real leases, timeouts and outages for seconds.
// `make check` (go test -short) skips it for a fast loop; `make test` runs
// it. A test that merely uses Redis or etcd is not slow.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow (processes, real timeouts): skipped under -short; `make test` runs it")
	}
}
