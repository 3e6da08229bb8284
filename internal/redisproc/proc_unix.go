//go:build unix

package redisproc

import "syscall"

// signalGroup signals the process group the child leads.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
