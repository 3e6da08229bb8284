//go:build unix && !linux

package api

import "syscall"

// procAttr: own process group (no parent-death signal off Linux: stop the
// bench with Ctrl-C, which stops its children).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
