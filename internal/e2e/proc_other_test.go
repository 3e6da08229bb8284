//go:build !linux

package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// dieWithTest: without a parent-death signal, a child of a test binary
// that crashes keeps running; the tests stop their children in t.Cleanup,
// which covers failures but not a killed test binary.
func dieWithTest(cmd *exec.Cmd, group bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
}

// ps lists pid, ppid and state of every process.
func ps() [][3]string {
	out, _ := exec.Command("ps", "-A", "-o", "pid=,ppid=,stat=").Output()
	var rows [][3]string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			rows = append(rows, [3]string{f[0], f[1], f[2]})
		}
	}
	return rows
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	for _, r := range ps() {
		if r[1] == strconv.Itoa(pid) {
			p, _ := strconv.Atoi(r[0])
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	for _, r := range ps() {
		if r[0] == strconv.Itoa(pid) {
			return !strings.HasPrefix(r[2], "Z")
		}
	}
	return false
}
