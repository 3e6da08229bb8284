package handlers

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/ax-sched/ax/worker"
)

// FuzzExecTemplate renders hostile payloads through a rule whose own text
// never starts an argument with '-' (but one) nor holds "..": whatever the
// payload, an accepted render keeps the program, starts no templated
// argument with '-', holds no ".." or NUL, keeps the /srv/ argument under
// /srv, and sets only the rule's environment. `make fuzz` runs it with
// -fuzztime=20000x.
func FuzzExecTemplate(f *testing.F) {
	for _, seed := range []string{
		`{"command":"f","args":{"a":"x","b":"y"}}`,
		`{"command":"f","args":{"a":"--output=/tmp/x","b":"y"}}`,
		`{"command":"f","args":{"a":"--files0-from=/etc/passwd","b":""}}`,
		`{"command":"f","args":{"a":"../../../etc/passwd","b":""}}`,
		`{"command":"f","args":{"a":".","b":"./etc"}}`,
		`{"command":"f","args":{"a":"x.","b":".y"}}`,
		`{"command":"f","args":{"a":"","b":"-n"}}`,
		`{"command":"f","args":{"a":-1,"b":2.5e3}}`,
		`{"command":"f","args":{"a":"a\u0000b","b":"c"}}`,
		`{"command":"f","args":{"a":"x-o","b":"%2e%2e"}}`,
		`{"command":"f","args":{"a":{"x":1},"b":"c"}}`,
		`{"command":"f","args":{"a":"x"}}`,
		`{"command":"f","args":{"a":"ü","b":"\u2024\u2024"}}`,
	} {
		f.Add([]byte(seed))
	}
	c, err := compile("f", ExecRule{
		Argv: []string{"cat", "/srv/{{.a}}{{.b}}", "{{.a}}.{{.b}}", "{{.b}}", "--name={{.a}}",
			`{{printf "%s/%s" .a .b}}`, "{{slice .a 1}}", "{{if .b}}{{.b}}{{else}}x{{end}}"},
		Env:  []string{"X={{.a}}{{.b}}", "Y=fixed"},
		Args: map[string]ArgRule{"a": {Pattern: `[^/]*`}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var p execPayload
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		if dec.Decode(&p) != nil {
			return
		}
		argv, env, err := c.render(p.Args, &worker.Task{ID: "t1", Type: "exec", Attempt: 1})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "exec f: ") {
				t.Fatalf("error does not name the command: %v", err)
			}
			return
		}
		if len(argv) != 8 || argv[0] != "cat" {
			t.Fatalf("argv %q", argv)
		}
		for i, a := range argv[1:] {
			if strings.Contains(a, "..") || strings.IndexByte(a, 0) >= 0 || (i != 3 && strings.HasPrefix(a, "-")) {
				t.Fatalf("argv[%d] = %q from payload %q", i+1, a, payload)
			}
		}
		if cl := path.Clean(argv[1]); cl != "/srv" && !strings.HasPrefix(cl, "/srv/") {
			t.Fatalf("argv[1] %q leaves /srv (%q)", argv[1], cl)
		}
		var names []string
		for _, e := range env {
			name, _, _ := strings.Cut(e, "=")
			names = append(names, name)
			if strings.IndexByte(e, 0) >= 0 || strings.Contains(e, "..") {
				t.Fatalf("env %q", e)
			}
		}
		if got := strings.Join(names, ","); got != "AX_TASK_ID,AX_TASK_TYPE,AX_ATTEMPT,AX_TRACE_ID,X,Y" {
			t.Fatalf("env names %s", got)
		}
	})
}
