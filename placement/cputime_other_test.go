//go:build !linux

package placement

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
