package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/worker"
)

// DefaultKillGrace is how long a stopped command's process group has
// between SIGTERM and SIGKILL.
const DefaultKillGrace = 5 * time.Second

// ExecRule is one allowlisted command of the exec handler.
type ExecRule struct {
	// Argv is the program and its arguments. Argv[0] is fixed by the
	// operator (a path, or a name looked up in PATH) and may not be a
	// template. The other elements are text/template strings filled from
	// the payload's args ("--name={{.name}}"); every placeholder must be
	// present in args. Each element stays exactly one argument whatever it
	// holds: the payload never reaches a shell.
	Argv []string
	// Env is added to the worker's environment (as are AX_TASK_ID,
	// AX_TASK_TYPE, AX_ATTEMPT and AX_TRACE_ID); values are templates too.
	Env map[string]string
	// Dir is the working directory ("": the worker's).
	Dir string
	// Timeout bounds one run (0: only the task's own timeout applies).
	Timeout time.Duration
	// KillGrace is how long the process group has to exit after SIGTERM
	// before SIGKILL (default DefaultKillGrace).
	KillGrace time.Duration
}

// execPayload is the exec handler's payload.
type execPayload struct {
	Command string                     `json:"command"`
	Args    map[string]json.RawMessage `json:"args"`
}

type command struct {
	name string
	rule ExecRule
	args []*template.Template // Argv[1:]
	env  []envTemplate        // sorted by name
}

type envTemplate struct {
	name string
	tmpl *template.Template
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Exec returns the exec handler for an allowlist of commands, by the name
// payloads use. Templates are checked here, so a bad rule fails at start.
//
// The command runs in its own process group. When the task is stopped
// (timeout, cancel, shutdown) or the rule's Timeout passes, the whole group
// gets SIGTERM, then SIGKILL after KillGrace; when the command exits by
// itself, whatever it left running in its group is stopped the same way.
// A process that leaves the group (setsid) escapes this.
func Exec(rules map[string]ExecRule) (worker.Handler, error) {
	cmds := make(map[string]*command, len(rules))
	for name, r := range rules {
		c, err := compile(name, r)
		if err != nil {
			return nil, err
		}
		cmds[name] = c
	}
	allowed := make([]string, 0, len(cmds))
	for name := range cmds {
		allowed = append(allowed, name)
	}
	sort.Strings(allowed)
	return func(ctx context.Context, t *worker.Task) error {
		var p execPayload
		dec := json.NewDecoder(bytes.NewReader(t.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return worker.NonRetryable(fmt.Errorf(`exec: payload must be {"command": NAME, "args": {...}}: %v`, err))
		}
		c := cmds[p.Command]
		if c == nil {
			return worker.NonRetryable(fmt.Errorf("exec: command %q is not in this worker's allowlist (allowed: %s)",
				p.Command, strings.Join(allowed, ", ")))
		}
		argv, env, err := c.render(p.Args, t)
		if err != nil {
			return worker.NonRetryable(err)
		}
		return c.run(ctx, t, argv, env)
	}, nil
}

func compile(name string, r ExecRule) (*command, error) {
	if name == "" {
		return nil, errors.New("exec: a rule needs a name")
	}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return nil, fmt.Errorf("exec: rule %q: Argv needs a program", name)
	}
	if strings.Contains(r.Argv[0], "{{") {
		return nil, fmt.Errorf("exec: rule %q: the program (Argv[0]) may not be a template: payloads must not choose it", name)
	}
	if r.Timeout < 0 || r.KillGrace < 0 {
		return nil, fmt.Errorf("exec: rule %q: Timeout and KillGrace must not be negative", name)
	}
	if r.KillGrace == 0 {
		r.KillGrace = DefaultKillGrace
	}
	c := &command{name: name, rule: r}
	for i, a := range r.Argv[1:] {
		tm, err := template.New(fmt.Sprintf("%s argument %d", name, i+1)).Option("missingkey=error").Parse(a)
		if err != nil {
			return nil, fmt.Errorf("exec: rule %q: %w", name, err)
		}
		c.args = append(c.args, tm)
	}
	for k, v := range r.Env {
		if !envNameRe.MatchString(k) {
			return nil, fmt.Errorf("exec: rule %q: %q is not an environment variable name", name, k)
		}
		tm, err := template.New(fmt.Sprintf("%s env %s", name, k)).Option("missingkey=error").Parse(v)
		if err != nil {
			return nil, fmt.Errorf("exec: rule %q: %w", name, err)
		}
		c.env = append(c.env, envTemplate{k, tm})
	}
	sort.Slice(c.env, func(i, j int) bool { return c.env[i].name < c.env[j].name })
	return c, nil
}

var missingKeyRe = regexp.MustCompile(`map has no entry for key "([^"]*)"`)

// render fills the rule's templates from args (strings and numbers only).
func (c *command) render(args map[string]json.RawMessage, t *worker.Task) (argv, env []string, err error) {
	data := make(map[string]string, len(args))
	for k, raw := range args {
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("exec %s: args.%s: %v", c.name, k, err)
		}
		switch x := v.(type) {
		case string:
			data[k] = x
		case json.Number:
			data[k] = x.String()
		default:
			return nil, nil, fmt.Errorf("exec %s: args.%s must be a string or a number", c.name, k)
		}
	}
	fill := func(tm *template.Template) (string, error) {
		var b strings.Builder
		if err := tm.Execute(&b, data); err != nil {
			if m := missingKeyRe.FindStringSubmatch(err.Error()); m != nil {
				return "", fmt.Errorf("exec %s: payload args lack %q, which the rule's %s uses", c.name, m[1], tm.Name()[len(c.name)+1:])
			}
			return "", fmt.Errorf("exec %s: %v", c.name, err)
		}
		return b.String(), nil
	}
	argv = []string{c.rule.Argv[0]}
	for _, tm := range c.args {
		s, err := fill(tm)
		if err != nil {
			return nil, nil, err
		}
		argv = append(argv, s)
	}
	env = append(os.Environ(),
		"AX_TASK_ID="+t.ID, "AX_TASK_TYPE="+t.Type, "AX_ATTEMPT="+strconv.Itoa(t.Attempt), "AX_TRACE_ID="+t.TraceID)
	for _, e := range c.env {
		s, err := fill(e.tmpl)
		if err != nil {
			return nil, nil, err
		}
		env = append(env, e.name+"="+s) // later entries win in os/exec
	}
	return argv, env, nil
}

// outcome turns how a run ended into the handler's result.
func (c *command) outcome(t *worker.Task, stopped, waitErr error, stdout, stderr *tail) error {
	var head string
	switch {
	case stopped != nil && errors.Is(stopped, errRuleTimeout):
		head = fmt.Sprintf("exec %s: killed after the rule's timeout of %v", c.name, c.rule.Timeout)
	case stopped != nil:
		head = fmt.Sprintf("exec %s: stopped: %v", c.name, stopped)
	case waitErr != nil:
		head = fmt.Sprintf("exec %s: %v", c.name, waitErr)
	default:
		t.SetResult(stdout.String())
		return nil
	}
	out := stderr
	if out.last(1) == "" {
		out = stdout
	}
	if s := out.last(queue.MaxErrorLen - len(head) - 2); s != "" {
		head += ": " + s
	}
	if stopped != nil && !errors.Is(stopped, errRuleTimeout) {
		return &stopError{msg: head, cause: stopped}
	}
	return errors.New(head)
}

var errRuleTimeout = errors.New("exec rule timeout")

// stopError reports a run stopped from outside, keeping the cause visible
// to errors.Is.
type stopError struct {
	msg   string
	cause error
}

func (e *stopError) Error() string { return e.msg }
func (e *stopError) Unwrap() error { return e.cause }
