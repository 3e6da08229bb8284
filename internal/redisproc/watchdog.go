//go:build unix

package redisproc

import (
	"io"
	"os/exec"
	"syscall"
)

// watchdogScript runs redis-server ("$@") under a shell that kills it when
// the parent dies. The parent holds the write end of the shell's stdin and
// never writes: the kernel closes it when the parent exits, however it
// exits, and the reader's read returns EOF. The shell ignores SIGTERM and
// SIGINT (set after redis-server started, so not inherited by it) and waits:
// a SIGTERM sent to the group stops redis-server, and the shell exits after
// it, with its status, so Wait returns only once redis-server is gone.
const watchdogScript = `exec 3<&0 0</dev/null
"$@" 3<&- &
pid=$!
{ while read -r _ <&3; do :; done; kill -KILL "$pid" 2>/dev/null; } &
trap '' TERM INT HUP
wait "$pid"
`

// launchWatchdog is launch where there is no parent-death signal.
func launchWatchdog(bin string, args ...string) (*exec.Cmd, io.Closer, error) {
	cmd := exec.Command("/bin/sh", append([]string{"-c", watchdogScript, "redisproc-watchdog", bin}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	return cmd, w, nil
}
