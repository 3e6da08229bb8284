package redisproc

import (
	"io"
	"os/exec"
	"syscall"
)

// launch runs redis-server directly. Setpgid: its own process group, so a
// Ctrl-C in the parent's terminal does not reach it and Signal reaches only
// it. Pdeathsig: the kernel kills it when the parent dies, even by SIGKILL,
// so a crashed test binary or ax dev leaves no server behind. (Pdeathsig
// follows the OS thread that started the child; Go keeps threads alive
// unless a goroutine exits while locked to one, which ax does not do.)
func launch(bin string, args ...string) (*exec.Cmd, io.Closer, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil, nil
}
