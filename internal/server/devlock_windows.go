//go:build windows

package server

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errLocked: another process holds the lock.
var errLocked = errors.New("locked")

// lockOffset is the byte locked: past the pid, which Windows's mandatory
// locks would otherwise hide from the second ax dev that reads it.
const lockOffset = 1 << 30

// lockFile takes an exclusive LockFileEx lock on one byte of f without
// waiting; Windows releases it when the process ends.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{Offset: lockOffset}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return errLocked
	}
	return err
}

func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &windows.Overlapped{Offset: lockOffset})
}
