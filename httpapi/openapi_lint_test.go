package httpapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ax-sched/ax/task"
)

// lintSpec returns what a client generator needs and raw finds missing
// in an OpenAPI document, one finding a line: every operation named
// (operationId), summarised and tagged; every path parameter declared;
// every parameter, request body and answer (but 204) typed; every error
// answer the Error schema; an operation behind the bearer token answering
// 401 and 403; every $ref resolving and every component schema used; no
// property left untyped without a description saying why.
func lintSpec(raw []byte) []string {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return []string{err.Error()}
	}
	l := &linter{doc: doc, used: map[string]bool{}}
	paths, _ := doc["paths"].(map[string]any)
	for _, path := range sortedKeys(paths) {
		item, _ := paths[path].(map[string]any)
		for _, method := range sortedKeys(item) {
			switch method {
			case "get", "post", "put", "patch", "delete":
				op, _ := item[method].(map[string]any)
				l.operation(strings.ToUpper(method)+" "+path, path, op, item["parameters"])
			}
		}
	}
	schemas, _ := dig(doc, "components", "schemas").(map[string]any)
	for _, name := range sortedKeys(schemas) {
		l.schema("components.schemas."+name, schemas[name])
	}
	for _, name := range sortedKeys(schemas) {
		if !l.used[name] {
			l.bad("components.schemas.%s: no operation uses it", name)
		}
	}
	return l.found
}

type linter struct {
	doc   map[string]any
	found []string
	used  map[string]bool // component schemas reached from an operation
}

var (
	operationIDForm = regexp.MustCompile(`^[a-z][a-zA-Z0-9]+$`)
	pathParam       = regexp.MustCompile(`\{([^}]+)\}`)
)

func (l *linter) bad(f string, a ...any) { l.found = append(l.found, fmt.Sprintf(f, a...)) }

func (l *linter) operation(at, path string, op map[string]any, shared any) {
	if id, _ := op["operationId"].(string); !operationIDForm.MatchString(id) {
		l.bad("%s: operationId %q is not a lowerCamel name", at, id)
	}
	if s, _ := op["summary"].(string); s == "" {
		l.bad("%s: no summary", at)
	}
	if tags, _ := op["tags"].([]any); len(tags) == 0 {
		l.bad("%s: no tag", at)
	}
	declared := map[string]bool{}
	params, _ := op["parameters"].([]any)
	if s, ok := shared.([]any); ok {
		params = append(params, s...)
	}
	for _, p := range params {
		p = l.deref(at, p)
		name, _ := dig(p, "name").(string)
		if dig(p, "schema") == nil {
			l.bad("%s: parameter %q has no schema", at, name)
		} else {
			l.reach(dig(p, "schema"))
		}
		if dig(p, "in") == "path" {
			declared[name] = true
			if dig(p, "required") != true {
				l.bad("%s: path parameter %q is not required", at, name)
			}
		}
	}
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		if !declared[m[1]] {
			l.bad("%s: path parameter {%s} is not declared", at, m[1])
		}
	}
	if body := op["requestBody"]; body != nil {
		body = l.deref(at, body)
		if s := dig(body, "content", "application/json", "schema"); s == nil {
			l.bad("%s: the request body has no application/json schema", at)
		} else {
			l.inline(at+" request", s)
		}
		l.reach(dig(body, "content"))
	}
	responses, _ := op["responses"].(map[string]any)
	if len(responses) == 0 {
		l.bad("%s: no responses", at)
	}
	for _, code := range sortedKeys(responses) {
		r := l.deref(at, responses[code])
		if d, _ := dig(r, "description").(string); d == "" {
			l.bad("%s %s: no description", at, code)
		}
		content, _ := dig(r, "content").(map[string]any)
		if code == "204" || code == "304" {
			if len(content) > 0 {
				l.bad("%s %s: a body on a %s", at, code, code)
			}
			continue
		}
		if len(content) == 0 {
			l.bad("%s %s: untyped (no content)", at, code)
		}
		for _, media := range sortedKeys(content) {
			if s := dig(content[media], "schema"); s == nil {
				l.bad("%s %s %s: no schema", at, code, media)
			} else {
				l.inline(at+" "+code, s)
			}
		}
		l.reach(content)
		if code[0] >= '4' && dig(content, "application/json", "schema", "$ref") != "#/components/schemas/Error" {
			l.bad("%s %s: an error answer is not the Error schema", at, code)
		}
	}
	secured := true
	if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
		secured = false
	}
	if secured {
		for _, code := range []string{"401", "403"} {
			if responses[code] == nil {
				l.bad("%s: behind the bearer token but no %s answer", at, code)
			}
		}
	}
}

// inline checks a schema written in an operation rather than referred to
// as the component schemas are.
func (l *linter) inline(at string, s any) {
	if dig(s, "$ref") == nil {
		l.schema(at, s)
	}
}

// deref follows v's $ref, if any, and notes the schema it reaches.
func (l *linter) deref(at string, v any) any {
	for i := 0; i < 8; i++ {
		ref, ok := dig(v, "$ref").(string)
		if !ok {
			return v
		}
		target := l.resolve(ref)
		if target == nil {
			l.bad("%s: $ref %q resolves to nothing", at, ref)
			return nil
		}
		if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
			if !l.used[name] {
				l.used[name] = true
				l.reach(target)
			}
		}
		v = target
	}
	return v
}

func (l *linter) resolve(ref string) any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = l.doc
	for _, k := range strings.Split(path, "/") {
		if cur = dig(cur, k); cur == nil {
			return nil
		}
	}
	return cur
}

// reach walks v and notes every component schema it refers to.
func (l *linter) reach(v any) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			l.deref("reach", map[string]any{"$ref": ref})
		}
		for _, k := range sortedKeys(x) {
			l.reach(x[k])
		}
	case []any:
		for _, e := range x {
			l.reach(e)
		}
	}
}

// schema checks a component schema: an object lists its properties (or
// says what its additional ones are), and every property is typed or says
// in a description what it holds.
func (l *linter) schema(at string, v any) {
	s, ok := v.(map[string]any)
	if !ok {
		l.bad("%s: not a schema", at)
		return
	}
	if s["$ref"] != nil {
		l.deref(at, s)
		return
	}
	if s["type"] == "object" && s["properties"] == nil && s["additionalProperties"] == nil {
		l.bad("%s: an object with neither properties nor additionalProperties", at)
	}
	props, _ := s["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		p, _ := props[name].(map[string]any)
		typed := p["type"] != nil || p["$ref"] != nil || p["enum"] != nil || p["oneOf"] != nil || p["anyOf"] != nil || p["allOf"] != nil
		if desc, _ := p["description"].(string); !typed && desc == "" {
			l.bad("%s.%s: untyped, and no description says why", at, name)
		}
		if p["type"] == "object" || p["type"] == "array" {
			l.schema(at+"."+name, p)
		}
		if items, ok := p["items"].(map[string]any); ok {
			l.schema(at+"."+name+"[]", items)
		}
	}
	for _, name := range sortedKeys(props) {
		if p, _ := props[name].(map[string]any); p["$ref"] != nil {
			l.deref(at+"."+name, p)
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := props[fmt.Sprint(r)]; !ok {
				l.bad("%s: required %q is not a property", at, r)
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestOpenAPILint: both documents pass lintSpec; the Error schema carries
// a 422's explanation; the State enum is every state of package task, and
// GET /v1/tasks filters on it.
func TestOpenAPILint(t *testing.T) {
	docs := map[string][]byte{}
	for _, name := range []string{"openapi.json", "openapi-internal.json"} {
		raw, err := os.ReadFile(name) // the documents served (TestOpenAPIMatchesRoutes)
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = raw
	}
	for name, raw := range docs {
		if found := lintSpec(raw); len(found) > 0 {
			t.Errorf("%s:\n%s", name, strings.Join(found, "\n"))
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(docs["openapi.json"], &doc); err != nil {
		t.Fatal(err)
	}
	if dig(doc, "components", "schemas", "ErrorDetail", "properties", "explanation") == nil {
		t.Error("ErrorDetail has no explanation (a 422 unplaceable answers one)")
	}
	var enum []string
	for _, s := range dig(doc, "components", "schemas", "State", "enum").([]any) {
		enum = append(enum, fmt.Sprint(s))
	}
	var states []string
	for _, s := range []task.State{task.Pending, task.HandedOff, task.Ready, task.Running, task.Success, task.Failed, task.Canceled, task.Timeout} {
		states = append(states, string(s))
	}
	slices.Sort(enum)
	slices.Sort(states)
	if !slices.Equal(enum, states) {
		t.Errorf("State enum %v, package task's states %v", enum, states)
	}
	var filter any
	for _, p := range dig(doc, "paths", "/v1/tasks", "get", "parameters").([]any) {
		if dig(p, "name") == "state" {
			filter = dig(p, "schema", "$ref")
		}
	}
	if filter != "#/components/schemas/State" {
		t.Errorf("GET /v1/tasks state= is %v, want the State enum", filter)
	}
}

// TestOpenAPILintFinds: each rule of lintSpec finds what it is for (a lint
// that passes everything would make TestOpenAPILint worthless).
func TestOpenAPILintFinds(t *testing.T) {
	good := `{"openapi":"3.1.0","paths":{"/v1/x/{id}":{"get":{"operationId":"getX","summary":"x","tags":["x"],
		"parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
		"responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/X"}}}},
		"401":{"$ref":"#/components/responses/Error"},"403":{"$ref":"#/components/responses/Error"}}}}},
		"components":{"responses":{"Error":{"description":"e","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Error"}}}}},
		"schemas":{"Error":{"type":"object","properties":{"code":{"type":"string"}}},
		"X":{"type":"object","properties":{"id":{"type":"string"},"any":{"description":"whatever the submitter sent"}}}}}}`
	if found := lintSpec([]byte(good)); len(found) > 0 {
		t.Fatalf("a clean document: %v", found)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"operationId":"getX",`, ``, `operationId "" is not`},
		{`"summary":"x",`, ``, "no summary"},
		{`"tags":["x"],`, ``, "no tag"},
		{`"required":true,`, ``, "is not required"},
		{`"name":"id"`, `"name":"key"`, "{id} is not declared"},
		{`"schema":{"type":"string"}}]`, `"x":1}]`, `parameter "id" has no schema`},
		{`"401":{"$ref":"#/components/responses/Error"},`, ``, "no 401 answer"},
		{`"403":{"$ref":"#/components/responses/Error"}`, `"403":{"description":"no"}`, "403: untyped"},
		{`"403":{"$ref":"#/components/responses/Error"}`, `"403":{"description":"no","content":{"application/json":{"schema":{"type":"object","additionalProperties":true}}}}`, "not the Error schema"},
		{`{"$ref":"#/components/schemas/X"}`, `{"$ref":"#/components/schemas/Y"}`, `resolves to nothing`},
		{`{"$ref":"#/components/schemas/X"}`, `{"type":"string"}`, "components.schemas.X: no operation uses it"},
		{`"any":{"description":"whatever the submitter sent"}`, `"any":{}`, "X.any: untyped"},
		{`"schema":{"$ref":"#/components/schemas/X"}`, `"schema":{"type":"object"}`, "GET /v1/x/{id} 200: an object with neither"},
		{`"schema":{"$ref":"#/components/schemas/X"}`, `"schema":{"type":"object","properties":{"n":{}}}`, "GET /v1/x/{id} 200.n: untyped"},
		{`"X":{"type":"object","properties"`, `"X":{"type":"object","required":["nope"],"properties"`, `required "nope"`},
	} {
		doc := strings.Replace(good, c.old, c.new, 1)
		if doc == good {
			t.Fatalf("%q is not in the document", c.old)
		}
		if found := strings.Join(lintSpec([]byte(doc)), "\n"); !strings.Contains(found, c.want) {
			t.Errorf("%s → %s: %q, want %q", c.old, c.new, found, c.want)
		}
	}
}
