package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

const sealSecret = "s3cret-redis-password-7f1c"

// TestSealHelper is the process sealed by TestSealProcess (it runs only
// with AX_TEST_SEAL set): it seals itself or not (control), checks what it
// can from inside (a sealed process of another user than root cannot read
// its own environ any more), prints its pid and waits for stdin to close.
func TestSealHelper(t *testing.T) {
	mode := os.Getenv("AX_TEST_SEAL")
	if mode == "" {
		t.Skip("helper of TestSealProcess")
	}
	if mode == "seal" {
		forget, err := handlers.SealProcess()
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if got := os.Getenv("AX_REDIS_PASSWORD"); got != sealSecret {
			fmt.Printf("error: the process lost its own copy: %q\n", got)
			return
		}
		forget()
		if _, set := os.LookupEnv("AX_REDIS_PASSWORD"); set {
			fmt.Println("error: forget left AX_REDIS_PASSWORD set")
			return
		}
		if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
			fmt.Printf("error: dumpable %d (%v)\n", d, err)
			return
		}
	}
	fmt.Println("pid", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// A sealed process's environment block no longer holds its secrets, and
// another process of the same (non-root) user can read neither its
// /proc/<pid>/environ nor its mem; without the seal it can (the control).
func TestSealProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the processes run as nobody")
	}
	// The test binary, where nobody may run it.
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "handlers.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	for _, c := range []struct {
		mode     string
		readable bool
	}{{"control", true}, {"seal", false}} {
		t.Run(c.mode, func(t *testing.T) {
			h := exec.Command(bin, "-test.run=^TestSealHelper$")
			h.Env = append(os.Environ(), "AX_TEST_SEAL="+c.mode, "AX_REDIS_PASSWORD="+sealSecret)
			h.Dir, h.SysProcAttr = "/", nobody
			stdin, err := h.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); _ = h.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			pid, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
			if err != nil || perr != nil {
				t.Fatalf("helper said %q (%v)", line, err)
			}
			// Root reads any process's environ: the block itself.
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || strings.Contains(string(env), sealSecret) == (c.mode == "seal") {
				t.Fatalf("/proc/%d/environ of a %s process (%v): %q", pid, c.mode, err, env)
			}
			if c.mode == "seal" && !strings.Contains(string(env), "AX_REDIS_PASSWORD=*******") {
				t.Fatalf("/proc/%d/environ: the secret's value is not overwritten: %q", pid, env)
			}
			for _, f := range []string{"environ", "mem"} {
				cat := exec.Command("head", "-c", "1", fmt.Sprintf("/proc/%d/%s", pid, f))
				cat.Dir, cat.SysProcAttr = "/", &syscall.SysProcAttr{Credential: nobody.Credential}
				got, err := cat.CombinedOutput()
				denied := strings.Contains(string(got), "Permission denied")
				if f == "environ" && c.readable && err != nil || !c.readable && !denied {
					t.Fatalf("nobody reading /proc/%d/%s of a %s process: %v %q", pid, f, c.mode, err, got)
				}
			}
		})
	}
}

// A rule with RunAs runs its command as that user, its group and no
// supplementary group, with no_new_privs: it cannot read the worker's
// /proc entries nor a file only the worker's user may read.
func TestExecRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as another user")
	}
	private := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(private, []byte(sealSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `id -u; id -G; grep NoNewPrivs /proc/self/status; cat /proc/$PPID/environ "$1" 2>&1; true`
	run, err := handlers.Exec(map[string]handlers.ExecRule{
		"snoop": {Argv: []string{"sh", "-c", script, "sh", private}, Env: []string{"PATH"}, Dir: "/", RunAs: "nobody"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tk := &worker.Task{ID: "t1", Type: "exec", Payload: []byte(`{"command": "snoop"}`)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, tk); err != nil {
		t.Fatal(err)
	}
	out := tk.Result()
	want := []string{"65534\n", "NoNewPrivs:\t1", "/proc/" + strconv.Itoa(os.Getpid()) + "/environ: Permission denied", private + ": Permission denied"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, sealSecret) || strings.Contains(out, "PATH=") {
		t.Errorf("the command read the worker's secrets:\n%s", out)
	}
	if lines := strings.Split(out, "\n"); len(lines) < 2 || strings.Contains(" "+lines[1]+" ", " 0 ") {
		t.Errorf("supplementary groups %q: want none of the worker's", lines[1])
	}
}

func TestRunAsIsChecked(t *testing.T) {
	for _, c := range []struct{ runAs, want string }{
		{"root", "run as root"},
		{"0:0", "run as root"},
		{"no-such-user-ax", "unknown user"},
		{"nobody:no-such-group-ax", "unknown group"},
		{"a b", "want user, user:group"},
		{"4242424", "give uid:gid"},
	} {
		_, err := handlers.Exec(map[string]handlers.ExecRule{"x": {Argv: []string{"true"}, RunAs: c.runAs}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run_as %q: %v, want an error with %q", c.runAs, err, c.want)
		}
	}
	if err := handlers.CheckRunAs("a b"); err == nil {
		t.Error(`CheckRunAs("a b"): want an error`)
	}
	for _, ok := range []string{"", "nobody", "65534:65534", "ax-jobs:ax-jobs"} {
		if err := handlers.CheckRunAs(ok); err != nil {
			t.Errorf("CheckRunAs(%q): %v", ok, err)
		}
	}
}
