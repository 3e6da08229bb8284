package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/config"
)

// A region file with two problems is reported one problem per line, each
// naming the file and the key; other errors stay on one line.
func TestReportPutsEachConfigProblemOnItsOwnLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("region: eu-west\nlisten: 127.0.0.1:0\nredis: {addr: 127.0.0.1:1}\n"+
		"etcd: {regional: {endpoints: [http://127.0.0.1:1]}}\n"+
		"pools:\n- {name: cpu, slots: -1, price_per_slot_hour: -2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	var ce config.Errors
	if !errors.As(err, &ce) || len(ce) < 2 {
		t.Fatalf("want at least two problems, got %v", err)
	}
	var w bytes.Buffer
	if code := report(&w, fmt.Errorf("load: %w", err)); code != 1 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(lines) != len(ce) {
		t.Fatalf("%d lines for %d problems:\n%s", len(lines), len(ce), w.String())
	}
	for _, want := range []string{"pools[0].slots", "pools[0].price_per_slot_hour"} {
		found := false
		for _, l := range lines {
			found = found || (strings.HasPrefix(l, "ax: "+path+": ") && strings.Contains(l, want))
		}
		if !found {
			t.Errorf("no line names %s:\n%s", want, w.String())
		}
	}
	w.Reset()
	if code := report(&w, &exitError{code: 3, err: errors.New("two\nlines")}); code != 3 || w.String() != "ax: two; lines\n" {
		t.Fatalf("exit %d, %q", code, w.String())
	}
}
