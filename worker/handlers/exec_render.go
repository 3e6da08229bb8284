package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/ax-sched/ax/worker"
)

// guard is an ArgRule with its pattern compiled (anchored at both ends).
type guard struct {
	ArgRule
	re *regexp.Regexp
}

var missingKeyRe = regexp.MustCompile(`map has no entry for key "([^"]*)"`)

// render fills the rule's templates from args (strings and numbers only),
// refusing values the rule's guards do not allow. The environment is the
// task's AX_ variables and the rule's Env, nothing else.
func (c *command) render(args map[string]json.RawMessage, t *worker.Task) (argv, env []string, err error) {
	data, err := c.values(args)
	if err != nil {
		return nil, nil, err
	}
	fill := func(tm *template.Template) (string, error) {
		s, err := execute(tm, data)
		if err != nil {
			if m := missingKeyRe.FindStringSubmatch(err.Error()); m != nil {
				return "", fmt.Errorf("exec %s: payload args lack %q, which the rule's %s uses", c.name, m[1], c.field(tm))
			}
			return "", fmt.Errorf("exec %s: %v", c.name, err)
		}
		return s, c.composed(tm, s, data)
	}
	argv = []string{c.rule.Argv[0]}
	for _, tm := range c.args {
		s, err := fill(tm)
		if err != nil {
			return nil, nil, err
		}
		argv = append(argv, s)
	}
	// Never nil: os/exec gives a nil Env the worker's whole environment.
	env = []string{"AX_TASK_ID=" + t.ID, "AX_TASK_TYPE=" + t.Type, "AX_ATTEMPT=" + strconv.Itoa(t.Attempt), "AX_TRACE_ID=" + t.TraceID}
	for _, e := range c.env {
		s := e.value
		if e.tmpl != nil {
			if s, err = fill(e.tmpl); err != nil {
				return nil, nil, err
			}
		}
		env = append(env, e.name+"="+s)
	}
	return argv, env, nil
}

// values decodes the payload's args and checks each against its guard, in
// name order (so the error is the same on every run).
func (c *command) values(args map[string]json.RawMessage) (map[string]string, error) {
	data := make(map[string]string, len(args))
	for _, k := range sortedKeys(args) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(args[k]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("exec %s: args.%s: %v", c.name, k, err)
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		default:
			return nil, fmt.Errorf("exec %s: args.%s must be a string or a number", c.name, k)
		}
		g := c.guards[k]
		var why string
		switch {
		case strings.IndexByte(s, 0) >= 0:
			why = "holds a NUL byte"
		case g.re != nil && !g.re.MatchString(s):
			why = fmt.Sprintf("does not match the rule's pattern %q", g.Pattern)
		case !g.AllowLeadingDash && strings.HasPrefix(s, "-"):
			why = "starts with '-', which the program could read as an option; the rule does not allow it (allow_leading_dash)"
		case !g.AllowDotDot && strings.Contains(s, ".."):
			why = `contains "..", which could climb out of a directory; the rule does not allow it (allow_dotdot)`
		}
		if why != "" {
			return nil, fmt.Errorf("exec %s: args.%s %s %s", c.name, k, short(s), why)
		}
		data[k] = s
	}
	return data, nil
}

// composed checks what the template made of the values: values each
// allowed on their own can still make an argument start with '-' or hold
// ".." together or with the rule's text ("{{.a}}{{.b}}" with "." and
// "./x"). The template runs again with every value not allowed the
// character in question replaced by as many 'x'; any '-' at the start or
// ".." at a place where that run has none came from such a value.
func (c *command) composed(tm *template.Template, s string, data map[string]string) error {
	if strings.HasPrefix(s, "-") {
		n, err := execute(tm, c.neutral(data, func(g guard) bool { return g.AllowLeadingDash }))
		if err != nil || !strings.HasPrefix(n, "-") {
			return fmt.Errorf("exec %s: the rule's %s would be %s, starting with '-' made from payload args, which the rule does not allow",
				c.name, c.field(tm), short(s))
		}
	}
	if strings.Contains(s, "..") {
		n, err := execute(tm, c.neutral(data, func(g guard) bool { return g.AllowDotDot }))
		if err != nil || !sameDotDots(s, n) {
			return fmt.Errorf(`exec %s: the rule's %s would be %s, with ".." made from payload args, which the rule does not allow`,
				c.name, c.field(tm), short(s))
		}
	}
	return nil
}

// sameDotDots reports whether every ".." of s is also in n at the same
// place; when the template changed the values' lengths (a function in the
// pipeline), whether n has at least as many.
func sameDotDots(s, n string) bool {
	if len(s) != len(n) {
		return strings.Count(n, "..") >= strings.Count(s, "..")
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '.' && s[i+1] == '.' && (n[i] != '.' || n[i+1] != '.') {
			return false
		}
	}
	return true
}

// neutral is data with the values whose guard does not pass allowed
// replaced by as many 'x'.
func (c *command) neutral(data map[string]string, allowed func(guard) bool) map[string]string {
	n := make(map[string]string, len(data))
	for k, v := range data {
		if allowed(c.guards[k]) {
			n[k] = v
		} else {
			n[k] = strings.Repeat("x", len(v))
		}
	}
	return n
}

func execute(tm *template.Template, data map[string]string) (string, error) {
	var b strings.Builder
	err := tm.Execute(&b, data)
	return b.String(), err
}

// field is the rule's field a template came from: "argv[2]", "env[0]".
func (c *command) field(tm *template.Template) string {
	return strings.TrimPrefix(tm.Name(), c.name+" ")
}

// templates lists the rule's templates, arguments then environment.
func (c *command) templates() []*template.Template {
	out := append([]*template.Template(nil), c.args...)
	for _, e := range c.env {
		if e.tmpl != nil {
			out = append(out, e.tmpl)
		}
	}
	return out
}

// fieldsOf adds to used the names a template reads as {{.name}}.
func fieldsOf(n parse.Node, used map[string]bool) {
	switch x := n.(type) {
	case nil:
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, n := range x.Nodes {
			fieldsOf(n, used)
		}
	case *parse.ActionNode:
		fieldsOf(x.Pipe, used)
	case *parse.PipeNode:
		if x == nil {
			return
		}
		for _, cmd := range x.Cmds {
			fieldsOf(cmd, used)
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			fieldsOf(a, used)
		}
	case *parse.FieldNode:
		used[x.Ident[0]] = true
	case *parse.IfNode:
		fieldsOf(x.Pipe, used)
		fieldsOf(x.List, used)
		fieldsOf(x.ElseList, used)
	case *parse.RangeNode:
		fieldsOf(x.Pipe, used)
		fieldsOf(x.List, used)
		fieldsOf(x.ElseList, used)
	case *parse.WithNode:
		fieldsOf(x.Pipe, used)
		fieldsOf(x.List, used)
		fieldsOf(x.ElseList, used)
	case *parse.TemplateNode:
		fieldsOf(x.Pipe, used)
	}
}

// short quotes a payload value for an error, at most 64 bytes of it.
func short(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
