package redisproc

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// launch runs redis-server directly. Windows has neither process groups
// nor a parent-death signal: a server outlives an ax that was killed.
func launch(bin string, args ...string) (*exec.Cmd, io.Closer, error) {
	return exec.Command(bin, args...), nil, nil
}

// signalGroup delivers sig to the process: Windows can send SIGKILL only,
// and refuses any other signal (syscall.EWINDOWS).
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// terminate ends the process at once: Windows has no SIGTERM to ask it.
func terminate(pid int) error { return signalGroup(pid, syscall.SIGKILL) }

// Pause is not supported on Windows (no SIGSTOP): errors.ErrUnsupported.
func (s *Server) Pause() error { return errors.ErrUnsupported }

// Resume is not supported on Windows (no SIGCONT): errors.ErrUnsupported.
func (s *Server) Resume() error { return errors.ErrUnsupported }
