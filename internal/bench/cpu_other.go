//go:build !unix

package bench

import "time"

// processCPU is 0: the bench reads no process CPU time off Unix.
func processCPU() time.Duration { return 0 }
