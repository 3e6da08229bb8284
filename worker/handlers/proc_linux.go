package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchLeader reports when the command's leader exits without reaping it:
// while it is an unreaped zombie its pid, and so the group id, cannot be
// reused, so signalling the group afterwards cannot hit a stranger. reap
// reaps it and returns cmd.Wait's error.
func watchLeader(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	pid := cmd.Process.Pid
	go func() {
		defer close(ch)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, syscall.EINTR) {
				return
			}
		}
	}()
	return ch, cmd.Wait
}

// groupAlive reports whether a process of group pgid still runs. kill(2)
// counts zombies, which wait for their parent (or init) to reap them, so
// /proc has the last word.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil {
		return false // ESRCH: none; EPERM: not ours any more
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything, so
		// parse from the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[2]) != strconv.Itoa(pgid) {
			continue
		}
		if st := f[0]; len(st) > 0 && st[0] != 'Z' && st[0] != 'X' {
			return true
		}
	}
	return false
}

// startNoNewPrivs starts cmd from an OS thread with no_new_privs set, which
// the command inherits: nothing it executes (a setuid program) gains
// privileges. The flag is per thread, so the thread is locked to a
// goroutine that ends without unlocking it, and the runtime discards the
// thread.
func startNoNewPrivs(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
