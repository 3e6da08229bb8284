package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// devLockName is the lock file in ax dev's state directory.
const devLockName = "ax-dev.lock"

// ErrDevDirInUse is returned by RunDev when another ax dev holds the
// state directory's lock.
var ErrDevDirInUse = errors.New("state directory in use")

// devLock is ax dev's exclusive hold on its state directory.
type devLock struct{ f *os.File }

// lockDevDir takes dir's lock without waiting and writes this process's
// pid into the lock file. While it is held no other ax dev uses dir; it is
// released by unlock or, however the process ends, by the kernel. When
// another process holds it, the error wraps ErrDevDirInUse, names dir and
// that process's pid, and the file is left as it was.
func lockDevDir(dir string) (*devLock, error) {
	path := filepath.Join(dir, devLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ax dev: lock %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("%w: %s is used by another ax dev (pid %s); stop it or pass another --dir",
				ErrDevDirInUse, dir, lockHolder(path))
		}
		return nil, fmt.Errorf("ax dev: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &devLock{f: f}, nil
}

// lockHolder is the pid written in the lock file at path, or "unknown".
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}

// unlock releases the lock. The file stays: removing it would let a
// process that opened it before the removal lock a file no one else sees.
func (l *devLock) unlock() {
	_ = unlockFile(l.f)
	_ = l.f.Close()
}
