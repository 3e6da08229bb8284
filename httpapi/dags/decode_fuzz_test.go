package dags

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// FuzzRequestDecoders feeds arbitrary bodies to the one strict decoder
// with every request type a handler decodes (which picks the type), and to
// the decoder of one DAG node: it never panics, and every error it returns
// maps to a 4xx in the one error shape, never a 5xx (a node's naming it).
func FuzzRequestDecoders(f *testing.F) {
	for _, s := range []string{`{}`, `{"items":[]}`, `{"tasks":[{"type":"a"}]}`, `{"priority":1}`,
		`{"filter":{"type":"x"}}`, `{"name":"s","every":"1s","task":{"type":"a"}}`, `{"nodes":[]}`,
		`{"spec":{"type":"a"}}`, `{"a":1,"a":2}`, `[`, `{"priority":1e999}`, "\x00", `{"tasks":null}`} {
		for k := range 8 {
			f.Add(uint8(k), []byte(s))
		}
	}
	for _, s := range []string{`{"id":"a","task":{"type":"x"}}`, `{"id":"b","depends_on":["a"],"trigger":"all_done","task":{}}`,
		`{"id":1}`, `{"id":"a","id":"b"}`, `{"id":"a","extra":1}`, `null`, `{"id":"a","task":null}`, `{"depends_on":"a"}`} {
		f.Add(uint8(8), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		targets := []func() any{
			func() any { return new(apiv1.BatchRequest) },
			func() any { return new(apiv1.PriorityRequest) },
			func() any { return new(apiv1.BulkCancelRequest) },
			func() any { return new(apiv1.ScheduleRequest) },
			func() any { return new(apiv1.ScheduleEnqueue) },
			func() any { return new(apiv1.HandOff) },
			func() any { return new(dagWire) },
			func() any {
				return &struct {
					Items []json.RawMessage `json:"items"`
				}{}
			},
		}
		if int(kind)%(len(targets)+1) == len(targets) {
			// One DAG node, as createDAG decodes each: a refusal names it.
			_, err := decodeDAGNode(3, body)
			if err != nil {
				if e := endpoint.ErrorOf(err); e.Status() < 400 || e.Status() >= 500 || e.Code == "" || !strings.HasPrefix(e.Field, "nodes[3]") {
					t.Fatalf("DAG node %q: %v → %d %q field %q", body, err, e.Status(), e.Code, e.Field)
				}
			}
			return
		}
		v := targets[int(kind)%len(targets)]()
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		w := httptest.NewRecorder()
		err := endpoint.Decode(w, r, 1<<20, v)
		if err == nil {
			return
		}
		e := endpoint.ErrorOf(err)
		if e.Status() < 400 || e.Status() >= 500 || e.Code == "" || e.Msg == "" {
			t.Fatalf("decoding %q into %T: %v → %d %q %q", body, v, err, e.Status(), e.Code, e.Msg)
		}
		var fe *task.FieldError
		if errors.As(err, &fe) && fe.Field == "" && e.Field != "" {
			t.Fatalf("field lost: %+v", e)
		}
	})
}
