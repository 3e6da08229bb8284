//go:build unix

package handlers

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// run starts argv in its own process group and waits for it, stopping the
// whole group when ctx ends or once the command exited.
func (c *command) run(ctx context.Context, t *worker.Task, argv, env []string) error {
	if c.rule.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.rule.Timeout, errRuleTimeout)
		defer cancel()
	}
	// stdout is the result: kept whole up to the largest a region takes,
	// so one over the region's limit fails (RESULT_TOO_LARGE), never cut.
	stdout, stderr := newTail(task.MaxResultBytes+1), newTail(tailBytes)
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("exec %s: %w", c.name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("exec %s: %w", c.name, err)
	}
	// *os.File outputs go to the child as they are: no copying goroutine
	// inside os/exec, so Wait returns when the leader exits even if
	// something it started still holds the pipes.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, c.rule.Dir
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a := c.runAs; a != nil {
		// Groups empty, not nil: the worker's supplementary groups are dropped.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
		err = startNoNewPrivs(cmd)
	} else {
		err = cmd.Start()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		// Retryable: the program may be installed on another of the pool's hosts.
		return fmt.Errorf("exec %s: %w", c.name, err)
	}
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(stdout, outR) })
	copies.Go(func() { _, _ = io.Copy(stderr, errR) })

	pgid := cmd.Process.Pid
	exited, reap := watchLeader(cmd)
	var stopped error
	select {
	case <-exited:
	case <-ctx.Done():
		stopped = context.Cause(ctx)
	}
	killGroup(pgid, c.rule.KillGrace)
	<-exited
	waitErr := reap()

	// The group is gone, so the pipes are closed — unless a process left
	// the group and kept them: then stop reading.
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(time.Second):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	return c.outcome(t, stopped, waitErr, stdout, stderr)
}

// killGroup stops what is left of process group pgid: SIGTERM, then
// SIGKILL after grace.
func killGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a stopped process acts on SIGTERM only once continued
	if waitGone(pgid, grace) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGone(pgid, 5*time.Second)
}

// waitGone polls until no process of the group runs, at most d.
func waitGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}
