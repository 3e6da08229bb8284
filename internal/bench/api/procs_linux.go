package api

import "syscall"

// procAttr: own process group; killed by the kernel when the bench dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
