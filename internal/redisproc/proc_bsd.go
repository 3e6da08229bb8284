//go:build unix && !linux

package redisproc

import (
	"io"
	"os/exec"
)

// launch runs redis-server under the stdin watchdog (watchdog.go): macOS and
// the BSDs have no parent-death signal, and a dev server must not outlive an
// ax dev that was killed.
func launch(bin string, args ...string) (*exec.Cmd, io.Closer, error) {
	return launchWatchdog(bin, args...)
}
