//go:build unix

package server

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: another process holds the lock.
var errLocked = errors.New("locked")

// lockFile takes an exclusive flock on f without waiting; the kernel drops
// it when the process ends, SIGKILL included.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
