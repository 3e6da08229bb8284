package placement

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used (user + system, every thread). Benchmarks
// report it per op next to wall time, because other jobs share this machine's cores.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
