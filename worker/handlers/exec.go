package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/ax-sched/ax/task"
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
	// Env is the command's whole environment, besides AX_TASK_ID,
	// AX_TASK_TYPE, AX_ATTEMPT and AX_TRACE_ID, which every command gets:
	// nothing of the worker's own environment (its Redis password, its
	// cloud credentials) reaches the command unless named here. Each entry
	// is "NAME=value", where value is a template like the arguments, or
	// "NAME", which passes the worker's own NAME through (read once, by
	// Exec; left out when the worker has none). Names starting with AX_ are
	// the worker's and may not be listed. Give "PATH" when the command
	// runs programs by name.
	Env []string
	// Args constrain the payload's args, by name. Every value, of an arg
	// named here or not, is refused when it holds a NUL byte, starts with
	// '-' (a program could read it as an option: --output=/etc/x) or
	// contains ".." (a path climbing out of its directory: ../../etc/x),
	// unless its ArgRule allows it; nor may values put together make an
	// argument start with '-' or hold ".." that the rule's own text does not.
	Args map[string]ArgRule
	// Dir is the working directory ("": the worker's).
	Dir string
	// Timeout bounds one run (0: only the task's own timeout applies).
	Timeout time.Duration
	// KillGrace is how long the process group has to exit after SIGTERM
	// before SIGKILL (default DefaultKillGrace).
	KillGrace time.Duration
	// RunAs runs the command as another user and group, with no
	// supplementary groups and, on Linux, no_new_privs (no setuid program
	// it starts gains privileges): "user", "user:group", "uid:gid", or
	// "uid" of a user the system knows. "" runs it as the worker's own
	// user. Pools that run tenants' code should set it (docs/security.md):
	// a command of another user cannot read the worker's files or its
	// /proc entries. Exec fails when the user or group is unknown.
	RunAs string
}

// ArgRule constrains the values one payload arg may take.
type ArgRule struct {
	// Pattern, when set, is a regular expression (RE2 syntax) the whole
	// value must match: "[0-9]+" refuses "12x". A rule that puts a value
	// into a path or an option should give one.
	Pattern string
	// AllowLeadingDash lets the value start with '-' (negative numbers,
	// say; then give a Pattern too).
	AllowLeadingDash bool
	// AllowDotDot lets the value contain "..".
	AllowDotDot bool
}

// execPayload is the exec handler's payload.
type execPayload struct {
	Command string                     `json:"command"`
	Args    map[string]json.RawMessage `json:"args"`
}

type command struct {
	name   string
	rule   ExecRule
	args   []*template.Template // Argv[1:]
	env    []envEntry           // in the rule's order
	guards map[string]guard     // by arg name; absent: the defaults
	runAs  *account             // nil: the worker's own user
}

// envEntry is one variable of a rule's environment: a template, or a fixed
// value passed through from the worker's environment (tmpl nil).
type envEntry struct {
	name  string
	tmpl  *template.Template
	value string
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnvName reports whether name may be listed in an ExecRule's Env: a
// variable name that does not start with AX_ (those are the worker's own
// settings, its secrets among them, and the task's AX_TASK_ID...).
func CheckEnvName(name string) error {
	switch {
	case !envNameRe.MatchString(name):
		return errors.New("not an environment variable name (letters, digits and '_', not starting with a digit)")
	case strings.HasPrefix(strings.ToUpper(name), "AX_"):
		return errors.New("names starting with AX_ are the worker's own (its settings and secrets, AX_TASK_ID...)")
	}
	return nil
}

// Exec returns the exec handler for an allowlist of commands, by the name
// payloads use. Templates are checked here, so a bad rule fails at start.
//
// A payload {"command": "echo", "args": {"msg": "hello"}} runs the
// allowlisted command named "echo"; args fill the rule's {{.name}}
// placeholders and must be strings or numbers. The payload never reaches a
// shell: each argv element is one argument. Values starting with '-' or
// holding ".." are refused unless the rule's Args allow them (ArgRule, with
// an optional pattern), and the command's environment is only what the
// rule's Env names. Success records the last 4 KiB of stdout; a non-zero
// exit is a retryable failure with the last bytes of stderr (or stdout when
// stderr is empty).
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
	return func(ctx context.Context, t *worker.Task) error {
		var p execPayload
		dec := json.NewDecoder(bytes.NewReader(t.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return worker.NonRetryable(fmt.Errorf(`exec: payload must be {"command": NAME, "args": {...}}: %v`, err))
		}
		c := cmds[p.Command]
		if c == nil {
			// Not the list of allowed commands: a tenant learns nothing of
			// what else this worker runs.
			return worker.NonRetryable(fmt.Errorf("exec: command %q is not in this worker's allowlist", p.Command))
		}
		argv, env, err := c.render(p.Args, t)
		if err != nil {
			return worker.NonRetryable(err)
		}
		return c.run(ctx, t, argv, env)
	}, nil
}

// RuleError is one problem with one field of an ExecRule. Field is the
// field's path inside the rule as a config file writes it: "argv[2]",
// "env[0]", "timeout".
type RuleError struct {
	Field string
	Msg   string
}

func (e *RuleError) Error() string { return e.Field + ": " + e.Msg }

// CheckExecRule lists every problem of a rule (nil when it has none), for
// config validation; Exec refuses a rule with any.
func CheckExecRule(r ExecRule) []*RuleError {
	_, errs := build("", r)
	return errs
}

func compile(name string, r ExecRule) (*command, error) {
	if name == "" {
		return nil, errors.New("exec: a rule needs a name")
	}
	c, errs := build(name, r)
	if len(errs) > 0 {
		return nil, fmt.Errorf("exec: rule %q: %w", name, errs[0])
	}
	a, err := lookupRunAs(r.RunAs)
	if err != nil {
		return nil, fmt.Errorf("exec: rule %q: run_as: %w", name, err)
	}
	c.runAs = a
	return c, nil
}

// build compiles a rule, or lists what is wrong with it.
func build(name string, r ExecRule) (*command, []*RuleError) {
	var errs []*RuleError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &RuleError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(r.Argv) == 0 || r.Argv[0] == "":
		bad("argv", "needs a program")
	case strings.Contains(r.Argv[0], "{{"):
		bad("argv[0]", "the program may not be a template: payloads must not choose it")
	}
	if r.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	if r.KillGrace < 0 {
		bad("kill_grace", "must not be negative")
	}
	if r.KillGrace == 0 {
		r.KillGrace = DefaultKillGrace
	}
	if err := CheckRunAs(r.RunAs); err != nil {
		bad("run_as", "%v", err)
	}
	c := &command{name: name, rule: r}
	parse := func(field, text string) *template.Template {
		tm, err := template.New(strings.TrimSpace(name + " " + field)).Option("missingkey=error").Parse(text)
		if err != nil {
			bad(field, "bad template: %v", err)
		}
		return tm
	}
	for i, a := range r.Argv {
		if i > 0 {
			c.args = append(c.args, parse(fmt.Sprintf("argv[%d]", i), a))
		}
	}
	seen := map[string]int{}
	for i, e := range r.Env {
		field := fmt.Sprintf("env[%d]", i)
		k, v, templated := strings.Cut(e, "=")
		if err := CheckEnvName(k); err != nil {
			bad(field, "%q: %v", e, err)
			continue
		}
		if j, dup := seen[k]; dup {
			bad(field, "%s is already env[%d]", k, j)
			continue
		}
		seen[k] = i
		if !templated {
			if v, ok := os.LookupEnv(k); ok {
				c.env = append(c.env, envEntry{name: k, value: v})
			}
			continue
		}
		c.env = append(c.env, envEntry{name: k, tmpl: parse(field, v)})
	}
	used := map[string]bool{}
	for _, tm := range c.templates() {
		if tm != nil {
			fieldsOf(tm.Root, used)
		}
	}
	c.guards = map[string]guard{}
	for _, k := range sortedKeys(r.Args) {
		a := r.Args[k]
		field := "args[" + k + "]"
		g := guard{ArgRule: a}
		if a.Pattern != "" {
			// Checked as written, so the error shows the operator's text.
			if _, err := regexp.Compile(a.Pattern); err != nil {
				bad(field+".pattern", "bad pattern: %v", err)
			} else if g.re, err = regexp.Compile(`^(?:` + a.Pattern + `)$`); err != nil {
				bad(field+".pattern", "bad pattern: %v", err)
			}
		}
		if !used[k] {
			bad(field, "no argv or env template of the rule uses {{.%s}}", k)
		}
		c.guards[k] = g
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
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
	if s := out.last(task.MaxErrorLen - len(head) - 2); s != "" {
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
