package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/fedtest"
)

// spec is openapi.json with a checker for the subset of JSON Schema it
// uses. Written here rather than taken from a library: the subset is ten
// keywords, and a keyword the checker does not know fails the check, so
// the spec cannot grow past what is verified without this file noticing.
// A strict checker also refuses a property an object schema does not list
// when the schema says nothing of additionalProperties: an answer of the
// server with a field the spec lacks is then a finding, so a client
// generated from the spec sees every field.
type spec3 struct {
	doc    map[string]any
	strict bool
}

// annotations carry no constraint.
var annotations = []string{"description", "title", "example", "examples", "default"}

func (s spec3) resolve(ref string) (any, error) {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only local references", ref)
	}
	var cur any = s.doc
	for _, k := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok || m[k] == nil {
			return nil, fmt.Errorf("$ref %q: no %s", ref, k)
		}
		cur = m[k]
	}
	return cur, nil
}

// check returns every way v breaks schema, each naming where (at).
func (s spec3) check(schema, v any, at string) []string {
	sc, ok := schema.(map[string]any)
	if !ok {
		return []string{at + ": schema is not an object"}
	}
	if ref, ok := sc["$ref"].(string); ok {
		target, err := s.resolve(ref)
		if err != nil {
			return []string{at + ": " + err.Error()}
		}
		return s.check(target, v, at)
	}
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, at+": "+fmt.Sprintf(f, a...)) }
	keys := make([]string, 0, len(sc))
	for k := range sc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rule := sc[k]
		switch k {
		case "type":
			var types []string
			switch t := rule.(type) {
			case string:
				types = []string{t}
			case []any:
				for _, x := range t {
					types = append(types, fmt.Sprint(x))
				}
			}
			if !slices.ContainsFunc(types, func(t string) bool { return isType(t, v) }) {
				bad("%s is not of type %v", short(v), types)
				return errs // the rest would only repeat it
			}
		case "enum":
			if !slices.ContainsFunc(rule.([]any), func(e any) bool { return reflect.DeepEqual(e, v) }) {
				bad("%s is not one of %v", short(v), rule)
			}
		case "required":
			if m, ok := v.(map[string]any); ok {
				for _, r := range rule.([]any) {
					if _, ok := m[r.(string)]; !ok {
						bad("lacks required %q", r)
					}
				}
			}
		case "properties", "additionalProperties":
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			props, _ := sc["properties"].(map[string]any)
			for name, val := range m {
				if p, ok := props[name]; ok {
					if k == "properties" {
						errs = append(errs, s.check(p, val, at+"."+name)...)
					}
					continue
				}
				if k == "properties" && s.strict && sc["additionalProperties"] == nil {
					bad("property %q is not in the schema", name)
				}
				if k == "additionalProperties" {
					switch ap := rule.(type) {
					case bool:
						if !ap {
							bad("property %q is not in the schema", name)
						}
					default:
						errs = append(errs, s.check(ap, val, at+"."+name)...)
					}
				}
			}
		case "items":
			if a, ok := v.([]any); ok {
				for i, x := range a {
					errs = append(errs, s.check(rule, x, fmt.Sprintf("%s[%d]", at, i))...)
				}
			}
		case "maxItems":
			if a, ok := v.([]any); ok && float64(len(a)) > rule.(float64) {
				bad("%d items, at most %v", len(a), rule)
			}
		case "minimum", "maximum":
			if n, ok := v.(float64); ok && (k == "minimum" && n < rule.(float64) || k == "maximum" && n > rule.(float64)) {
				bad("%v is beyond %s %v", n, k, rule)
			}
		case "format":
			if str, ok := v.(string); ok && rule == "date-time" {
				if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
					bad("%q is not a date-time", str)
				}
			}
		default:
			if !slices.Contains(annotations, k) {
				bad("the checker does not know the keyword %q", k)
			}
		}
	}
	return errs
}

func isType(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == math.Trunc(n)
	}
	return false
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// op is the operation of a path and method ("" when the spec lacks it).
func (s spec3) op(method, path string) map[string]any {
	paths, _ := s.doc["paths"].(map[string]any)
	ops, _ := paths[path].(map[string]any)
	o, _ := ops[strings.ToLower(method)].(map[string]any)
	return o
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func loadSpec(t *testing.T, f *fed) spec3 {
	t.Helper()
	var doc map[string]any
	f.Call(http.MethodGet, f.R(aws).URL()+"/v1/openapi.json", "", nil).Want(t, http.StatusOK).JSON(t, &doc)
	return spec3{doc: doc, strict: true}
}

// TestSchemaCheckerRefuses: the checker finds what a wrong answer has
// wrong (a checker that passes everything would make openAPIConformance
// worthless).
func TestSchemaCheckerRefuses(t *testing.T) {
	s := spec3{doc: map[string]any{"components": map[string]any{"schemas": map[string]any{
		"T": map[string]any{"type": "object", "required": []any{"id"}, "additionalProperties": false, "properties": map[string]any{
			"id": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer", "minimum": 0.0},
			"at": map[string]any{"type": "string", "format": "date-time"}, "s": map[string]any{"enum": []any{"A"}},
			"xs": map[string]any{"type": "array", "maxItems": 1.0, "items": map[string]any{"type": "string"}}}}}}}}
	ref := map[string]any{"$ref": "#/components/schemas/T"}
	for _, c := range []struct {
		doc  string
		want string // "" = valid
	}{
		{`{"id":"x","n":1,"at":"2026-12-01T10:00:00Z","s":"A","xs":["a"]}`, ""},
		{`{"n":1}`, `lacks required "id"`},
		{`{"id":1}`, "not of type"},
		{`{"id":"x","n":1.5}`, "not of type [integer]"},
		{`{"id":"x","n":-1}`, "beyond minimum"},
		{`{"id":"x","at":"yesterday"}`, "not a date-time"},
		{`{"id":"x","s":"B"}`, "not one of"},
		{`{"id":"x","xs":["a","b"]}`, "at most"},
		{`{"id":"x","xs":[1]}`, "$.xs[0]: 1 is not of type"},
		{`{"id":"x","extra":true}`, `"extra" is not in the schema`},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
			t.Fatal(err)
		}
		errs := strings.Join(s.check(ref, v, "$"), "; ")
		if c.want == "" && errs != "" || c.want != "" && !strings.Contains(errs, c.want) {
			t.Errorf("%s: %q, want %q", c.doc, errs, c.want)
		}
	}
	if errs := s.check(map[string]any{"pattern": "x"}, "x", "$"); len(errs) != 1 || !strings.Contains(errs[0], "does not know") {
		t.Errorf("an unknown keyword: %v", errs)
	}
	open := map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}
	extra := map[string]any{"id": "x", "extra": true}
	if errs := s.check(open, extra, "$"); len(errs) != 0 {
		t.Errorf("a lenient checker refuses an unlisted property: %v", errs)
	}
	s.strict = true
	if errs := s.check(open, extra, "$"); len(errs) != 1 || !strings.Contains(errs[0], `"extra" is not in the schema`) {
		t.Errorf("a strict checker on an unlisted property: %v", errs)
	}
	open["additionalProperties"] = true
	if errs := s.check(open, extra, "$"); len(errs) != 0 {
		t.Errorf("a strict checker refuses what additionalProperties allows: %v", errs)
	}
}

// openAPIConformance: every example request in openapi.json validates
// against its schema, and the main ones are accepted by a real server; the
// answers of the main routes, and an error, validate against the schemas
// the spec gives for their status.
func openAPIConformance(t *testing.T, f *fed) {
	s := loadSpec(t, f)
	base := f.R(aws).URL()
	examples := map[string]any{}
	for path, ops := range s.doc["paths"].(map[string]any) {
		for method, o := range ops.(map[string]any) {
			media := dig(o, "requestBody", "content", "application/json")
			if ex := dig(media, "example"); ex != nil {
				key := strings.ToUpper(method) + " " + path
				examples[key] = ex
				if errs := s.check(dig(media, "schema"), ex, key+" example"); len(errs) > 0 {
					t.Errorf("%s", strings.Join(errs, "\n"))
				}
			}
		}
	}
	for _, must := range []string{"POST /v1/tasks", "POST /v1/tasks/batch", "POST /v1/tasks/{id}/priority", "POST /v1/tasks/cancel", "POST /v1/placement/explain"} {
		if examples[must] == nil {
			t.Errorf("openapi.json has no example request for %s", must)
		}
	}
	// answer checks one answer against the spec's schema for its status.
	answer := func(method, path string, rep fedtest.Reply) {
		t.Helper()
		o := s.op(method, path)
		schema := dig(o, "responses", fmt.Sprint(rep.Status), "content", "application/json", "schema")
		if ref, ok := dig(o, "responses", fmt.Sprint(rep.Status), "$ref").(string); ok {
			r, err := s.resolve(ref)
			if err != nil {
				t.Fatal(err)
			}
			schema = dig(r, "content", "application/json", "schema")
		}
		if schema == nil {
			t.Fatalf("%s %s: the spec gives no schema for status %d (%s)", method, path, rep.Status, rep.Body)
		}
		var v any
		rep.JSON(t, &v)
		if errs := s.check(schema, v, method+" "+path+" "+fmt.Sprint(rep.Status)); len(errs) > 0 {
			t.Errorf("%s\nthe answer: %s", strings.Join(errs, "\n"), rep.Body)
		}
	}
	rep := f.Call(http.MethodPost, base+"/v1/tasks", tokOperator, examples["POST /v1/tasks"]).Want(t, http.StatusCreated)
	answer("POST", "/v1/tasks", rep)
	var sr struct{ ID string }
	rep.JSON(t, &sr)
	answer("POST", "/v1/tasks", f.Call(http.MethodPost, base+"/v1/tasks", tokOperator, examples["POST /v1/tasks"]).Want(t, http.StatusOK)) // the idempotent repeat
	answer("POST", "/v1/tasks/batch", f.Call(http.MethodPost, base+"/v1/tasks/batch", tokOperator, examples["POST /v1/tasks/batch"]).Want(t, http.StatusOK))
	f.Call(http.MethodPost, base+"/v1/placement/explain", tokOperator, examples["POST /v1/placement/explain"]).Want(t, http.StatusOK)
	f.Call(http.MethodPost, base+"/v1/tasks/"+sr.ID+"/priority", tokOperator, examples["POST /v1/tasks/{id}/priority"]).Want(t, http.StatusOK)
	f.Call(http.MethodPost, base+"/v1/tasks/cancel", tokOperator, examples["POST /v1/tasks/cancel"]).Want(t, http.StatusOK)
	answer("GET", "/v1/tasks/{id}", f.Call(http.MethodGet, base+"/v1/tasks/"+sr.ID, tokOperator, nil).Want(t, http.StatusOK))
	answer("GET", "/v1/tasks/{id}/trail", f.Call(http.MethodGet, base+"/v1/tasks/"+sr.ID+"/trail", tokOperator, nil).Want(t, http.StatusOK))
	answer("GET", "/v1/tasks", f.Call(http.MethodGet, base+"/v1/tasks?limit=20", tokOperator, nil).Want(t, http.StatusOK))
	answer("GET", "/v1/regions", f.Call(http.MethodGet, base+"/v1/regions", tokOperator, nil).Want(t, http.StatusOK))
	answer("GET", "/v1/dlq", f.Call(http.MethodGet, base+"/v1/dlq?limit=20", tokOperator, nil).Want(t, http.StatusOK))
	answer("POST", "/v1/stream/tickets", f.Call(http.MethodPost, base+"/v1/stream/tickets", tokAcme, nil).Want(t, http.StatusCreated))
	answer("GET", "/v1/tasks/{id}", f.Call(http.MethodGet, base+"/v1/tasks/"+sr.ID, tokGlobex, nil).Want(t, http.StatusNotFound))
	answer("POST", "/v1/tasks", f.Call(http.MethodPost, base+"/v1/tasks", tokAcme, spec{"type": "x", "priority": 9}).Want(t, http.StatusBadRequest))
}
