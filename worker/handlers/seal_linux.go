package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SealProcess keeps the secrets of the process that calls it from the
// commands it runs, as far as a process can by itself. Call it first,
// before anything reads the configuration:
//
//   - Every AX_ variable holding a secret (secretEnv: AX_REDIS_PASSWORD,
//     AX_AUTH_CLUSTER_TOKEN...) is copied into the process's own memory and
//     its value in the environment block the kernel keeps, which
//     /proc/<pid>/environ shows and os.Unsetenv never changes, is
//     overwritten with '*'.
//   - The process becomes non-dumpable (PR_SET_DUMPABLE 0): its /proc
//     files (environ, mem, maps...) belong to root and no other process of
//     its user may read them or ptrace it. Commands it starts are dumpable
//     again once they exec.
//
// The caller reads its configuration next, then calls forget, which unsets
// those variables (nothing started afterwards inherits them). A process
// running as root cannot be shielded from a command running as root:
// give such commands another user (ExecRule.RunAs).
func SealProcess() (forget func(), err error) {
	names := secretNames()
	for _, n := range names {
		// A new string, held by the process: the block is overwritten below.
		_ = os.Setenv(n, os.Getenv(n))
	}
	forget = forgetter(names)
	if len(names) > 0 {
		if err := scrubEnvBlock(); err != nil {
			return forget, fmt.Errorf("seal: overwrite the secrets of /proc/self/environ: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return forget, fmt.Errorf("seal: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return forget, nil
}

// scrubEnvBlock overwrites, in place, the values of the secret variables
// in the environment block the process started with (between env_start and
// env_end of /proc/self/stat), through /proc/self/mem.
func scrubEnvBlock() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// "pid (comm) state ...": comm may hold anything, so count from the
	// last ')'; env_start and env_end are fields 50 and 51, the 48th and
	// 49th after it.
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	if i < 0 || len(f) < 49 {
		return errors.New("/proc/self/stat has no env_start and env_end")
	}
	start, err1 := strconv.ParseInt(string(f[47]), 10, 64)
	end, err2 := strconv.ParseInt(string(f[48]), 10, 64)
	if err := errors.Join(err1, err2); err != nil || end < start {
		return fmt.Errorf("/proc/self/stat: env_start %s, env_end %s", f[47], f[48])
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	n, err := mem.ReadAt(block, start)
	if err != nil && n == 0 {
		return err
	}
	block = block[:n]
	changed := false
	for off := 0; off < len(block); {
		entry := block[off:]
		if j := bytes.IndexByte(entry, 0); j >= 0 {
			entry = entry[:j]
		}
		if eq := bytes.IndexByte(entry, '='); eq > 0 && secretEnv(string(entry[:eq])) {
			for k := eq + 1; k < len(entry); k++ {
				entry[k] = '*'
			}
			changed = true
		}
		off += len(entry) + 1
	}
	if !changed {
		return nil
	}
	_, err = mem.WriteAt(block, start)
	return err
}
