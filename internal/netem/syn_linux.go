package netem

import (
	"net"
	"syscall"
)

// dropSYNs shrinks ln's accept queue to one connection: once it holds one
// the kernel drops new SYNs, as a partitioned route would. Calling listen
// again on a listening socket only changes its backlog.
func dropSYNs(ln *net.TCPListener) bool { return setBacklog(ln, 0) }

// acceptSYNs gives ln its usual accept queue back.
func acceptSYNs(ln *net.TCPListener) { setBacklog(ln, syscall.SOMAXCONN) }

func setBacklog(ln *net.TCPListener, n int) bool {
	rc, err := ln.SyscallConn()
	if err != nil {
		return false
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), n) }); err != nil {
		return false
	}
	return lerr == nil
}
