package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// Template values are guarded: --output=… would truncate a file,
// --files0-from=… leak one into the error and ../../../etc/passwd be read.
// Each payload below is refused before anything runs, unless the rule
// allows it.
func TestExecTemplateValuesAreGuarded(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "a.txt"), []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, err := handlers.Exec(map[string]handlers.ExecRule{
		"sort":  {Argv: []string{"sort", "{{.file}}"}},
		"wc":    {Argv: []string{"wc", "-l", "{{.file}}"}},
		"cat":   {Argv: []string{"cat", dir + "/data/{{.file}}"}},
		"cat2":  {Argv: []string{"cat", dir + "/data/{{.dir}}{{.file}}"}},
		"count": {Argv: []string{"echo", "{{.n}}"}, Args: map[string]handlers.ArgRule{"n": {Pattern: `-?[0-9]+`, AllowLeadingDash: true}}},
		"id":    {Argv: []string{"echo", "--id={{.id}}"}, Args: map[string]handlers.ArgRule{"id": {Pattern: `[a-z0-9-]{1,32}`}}},
		"rel":   {Argv: []string{"echo", "{{.path}}"}, Args: map[string]handlers.ArgRule{"path": {AllowDotDot: true}}},
		"up":    {Argv: []string{"echo", "../shared/{{.f}}"}},
		"greet": {Argv: []string{"echo", "hi"}, Env: []string{"NAME={{.name}}"}},
		"slice": {Argv: []string{"echo", "{{slice .v 1}}"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		command string
		args    map[string]any
		refused string // "" when it must run
		result  string
	}{
		{"--output truncates a file", "sort", map[string]any{"file": "--output=" + victim}, `args.file "--output=`, ""},
		{"--files0-from leaks a file", "wc", map[string]any{"file": "--files0-from=" + victim}, "starts with '-', which the program could read as an option", ""},
		{"short option", "sort", map[string]any{"file": "-o" + victim}, "starts with '-'", ""},
		{"path traversal", "cat", map[string]any{"file": "../../../etc/passwd"}, `args.file "../../../etc/passwd" contains ".."`, ""},
		{"traversal hidden inside", "cat", map[string]any{"file": "a/b/../../../../etc/passwd"}, `contains ".."`, ""},
		{"traversal made of two values", "cat2", map[string]any{"dir": ".", "file": "./../etc/passwd"}, `contains ".."`, ""},
		{"dots joined across values", "cat2", map[string]any{"dir": "x.", "file": "./etc"}, `with ".." made from payload args`, ""},
		{"a lone dash", "sort", map[string]any{"file": "-"}, "starts with '-'", ""},
		{"NUL byte", "rel", map[string]any{"path": "a\x00b"}, "holds a NUL byte", ""},
		{"pattern", "id", map[string]any{"id": "ab/../../x"}, `does not match the rule's pattern "[a-z0-9-]{1,32}"`, ""},
		{"negative number the rule does not allow", "sort", map[string]any{"file": -5}, "starts with '-'", ""},
		{"a dash a template function uncovers", "slice", map[string]any{"v": "x-n"}, "starting with '-' made from payload args", ""},
		{"env values too", "greet", map[string]any{"name": "../x"}, `args.name "../x" contains ".."`, ""},
		{"unused args too", "greet", map[string]any{"name": "ann", "extra": "--x"}, `args.extra "--x" starts with '-'`, ""},

		{"plain file", "cat", map[string]any{"file": "a.txt"}, "", "a\n"},
		{"dots that are not ..", "cat2", map[string]any{"dir": "", "file": "a.txt"}, "", "a\n"},
		{"allowed negative number", "count", map[string]any{"n": -5}, "", "-5\n"},
		{"the rule's own leading dash", "id", map[string]any{"id": "r-12"}, "", "--id=r-12\n"},
		{"allowed ..", "rel", map[string]any{"path": "../x"}, "", "../x\n"},
		{"the rule's own ..", "up", map[string]any{"f": "x"}, "", "../shared/x\n"},
		{"a dash inside a value", "rel", map[string]any{"path": "a-b --c"}, "", "a-b --c\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := json.Marshal(map[string]any{"command": c.command, "args": c.args})
			tk := &worker.Task{ID: "t1", Type: "exec", Attempt: 1, Payload: p}
			err := run(context.Background(), tk)
			if c.refused == "" {
				if err != nil || tk.Result() != c.result {
					t.Fatalf("got %v, result %q; want %q", err, tk.Result(), c.result)
				}
				return
			}
			if !errors.Is(err, worker.ErrNonRetryable) || !strings.Contains(err.Error(), c.refused) ||
				!strings.HasPrefix(err.Error(), "exec "+c.command+": ") {
				t.Fatalf("got %v, want a NonRetryable error naming %q with %q", err, c.command, c.refused)
			}
		})
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
		t.Fatalf("the victim file is now %q (%v)", b, err)
	}
}

func TestExecArgRulesAreChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		rule handlers.ExecRule
		want string
	}{
		{"bad pattern", handlers.ExecRule{Argv: []string{"echo", "{{.n}}"}, Args: map[string]handlers.ArgRule{"n": {Pattern: "[0-9"}}},
			`exec: rule "x": args[n].pattern: bad pattern: error parsing regexp: missing closing ]`},
		{"arg no template uses", handlers.ExecRule{Argv: []string{"echo", "{{.n}}"}, Args: map[string]handlers.ArgRule{"m": {}}},
			`exec: rule "x": args[m]: no argv or env template of the rule uses {{.m}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := handlers.Exec(map[string]handlers.ExecRule{"x": c.rule})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	// An arg used only in an env template, or inside if/range, is used.
	if errs := handlers.CheckExecRule(handlers.ExecRule{Argv: []string{"echo", "{{if .v}}-v{{end}}"}, Env: []string{"N={{.n}}"},
		Args: map[string]handlers.ArgRule{"n": {}, "v": {}}}); len(errs) != 0 {
		t.Fatalf("CheckExecRule: %v", errs)
	}
}
