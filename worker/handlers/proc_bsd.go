//go:build unix && !linux

package handlers

import (
	"os/exec"
	"syscall"
)

// watchLeader reaps the leader when it exits (no waitid(WNOWAIT) here).
func watchLeader(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(ch) }()
	return ch, func() error { <-ch; return err }
}

// groupAlive reports whether group pgid has a process (zombies count).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// startNoNewPrivs starts cmd: these systems have no no_new_privs.
func startNoNewPrivs(cmd *exec.Cmd) error { return cmd.Start() }
