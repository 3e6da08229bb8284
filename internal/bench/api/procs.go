package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// axProc is one ax child process (`ax server` or `ax worker`) of a bench
// run: its output kept for the error message when it dies early.
type axProc struct {
	name string
	cmd  *exec.Cmd
	out  *procLog
	file *os.File // the whole output (Options.Logs); nil without
	done chan struct{}
}

// procLog keeps the last 64 KiB a child wrote.
type procLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *procLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.b.Len() > 64<<10 {
		tail := append([]byte(nil), l.b.Bytes()[l.b.Len()-32<<10:]...)
		l.b.Reset()
		l.b.Write(tail)
	}
	return len(p), nil
}

func (l *procLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAx starts bin with args and env. The child is in its own process
// group (a Ctrl-C reaches only the bench, which stops it) and the kernel
// kills it if the bench dies. With logs set (a directory) its whole
// output is also written to logs/<name>.log, '/' in name made '-'.
func startAx(bin, name, logs string, env []string, args ...string) (*axProc, error) {
	p := &axProc{name: name, out: &procLog{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if logs != "" {
		f, err := os.Create(filepath.Join(logs, strings.ReplaceAll(name, "/", "-")+".log"))
		if err != nil {
			return nil, fmt.Errorf("bench: the log of %s: %w", name, err)
		}
		p.file = f
		p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(p.out, f), io.MultiWriter(p.out, f)
	}
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM and waits, SIGKILL after 10 s.
func (p *axProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if p.file != nil {
		_ = p.file.Close()
	}
}

// exited is an error naming the process and its last output when it has
// ended, else nil.
func (p *axProc) exited() error {
	select {
	case <-p.done:
		out := p.out.String()
		return fmt.Errorf("bench: %s exited: %s", p.name, out[max(0, len(out)-2000):])
	default:
		return nil
	}
}

// cpu is the CPU time the process has used (user + system).
func (p *axProc) cpu() time.Duration { return pidCPU(p.cmd.Process.Pid) }

// pidCPU reads utime + stime of pid from /proc/<pid>/stat (0 where there
// is no /proc).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// After the command: state is field 3; utime and stime are fields 14
	// and 15, in clock ticks (USER_HZ, 100 on Linux).
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// freeAddr returns a 127.0.0.1 address with a port free at the time.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitFor polls ok every 50 ms until it holds, one of procs exits, or
// within passes.
func waitFor(ctx context.Context, within time.Duration, what string, procs []*axProc, ok func() bool) error {
	deadline := time.Now().Add(within)
	for !ok() {
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s: not within %v", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

var errNoExe = errors.New("bench: api: no ax binary to start (api.Options.Exe)")
