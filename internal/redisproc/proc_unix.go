//go:build unix

package redisproc

import "syscall"

// signalGroup signals the process group the child leads.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// terminate asks the process group to exit: SIGTERM, and SIGCONT should it
// be paused.
func terminate(pid int) error {
	err := signalGroup(pid, syscall.SIGTERM)
	_ = signalGroup(pid, syscall.SIGCONT)
	return err
}

// Pause freezes the server (SIGSTOP): connections are accepted, nothing is
// answered, until Resume.
func (s *Server) Pause() error { return s.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.Signal(syscall.SIGCONT) }
