package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/buildinfo"
)

// runVersion runs `ax version args...` and returns stdout and the exit code
// main would use.
func runVersion(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"--settings=", "version"}, args...))
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.code
	}
	return out.String(), 1
}

func TestVersionCommand(t *testing.T) {
	t.Setenv("AX_OUTPUT", "")
	out, code := runVersion(t)
	if code != 0 || out != buildinfo.Get().String()+"\n" {
		t.Fatalf("ax version: exit %d, %q; want 0, %q", code, out, buildinfo.Get().String())
	}

	out, code = runVersion(t, "-o", "json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("ax version -o json: exit %d, %q (%v)", code, out, err)
	}
	if got != buildinfo.Get() || got.GoVersion != runtime.Version() || got.Version == "" || got.Commit == "" {
		t.Errorf("ax version -o json = %+v, want %+v", got, buildinfo.Get())
	}

	if out, code = runVersion(t, "-o", "yaml"); code != 2 || strings.TrimSpace(out) != "" {
		t.Errorf("ax version -o yaml: exit %d, stdout %q; want usage error 2 and no output", code, out)
	}
}
