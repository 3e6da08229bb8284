package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// Headers over http_server.max_header_bytes (8192 here) get ax's JSON
// error through the real server, 431 headers_too_large naming the largest
// header; net/http's own plain-text 431 is left only for headers over twice
// the limit (and its 4096 bytes of slack), which it refuses before any
// handler runs. Headers under the limit are served.
func TestOversizedHeadersGetTheJSONError(t *testing.T) {
	t.Parallel()
	fed := newFederation(t, fedOpts{noWorkers: true, regions: []string{"us-east-1"}, httpServer: "max_header_bytes: 8192\n"})
	for _, c := range []struct {
		pad  int
		code int
		json bool
	}{
		{6000, http.StatusOK, true},
		{10000, http.StatusRequestHeaderFieldsTooLarge, true},
		{16000, http.StatusRequestHeaderFieldsTooLarge, true},
		{40000, http.StatusRequestHeaderFieldsTooLarge, false},
	} {
		code, body := fed.rawCall("us-east-1", tokSubmitterA, http.MethodGet, "/v1/regions", nil,
			map[string]string{"X-Pad": strings.Repeat("p", c.pad)})
		if code != c.code {
			t.Fatalf("GET /v1/regions with a header of %d bytes: %d %s, want %d", c.pad, code, body, c.code)
		}
		if code == http.StatusOK {
			continue
		}
		var eb apiv1.ErrorBody
		isJSON := json.Unmarshal(body, &eb) == nil
		if c.json && (!isJSON || eb.Error.Code != apiv1.CodeHeadersTooLarge || eb.Error.Field != "X-Pad" || eb.Error.Message == "") {
			t.Errorf("a header of %d bytes (limit 8192): %s, want the JSON error headers_too_large with field X-Pad", c.pad, body)
		}
		if !c.json && isJSON {
			t.Errorf("a header of %d bytes, over twice the limit: %s; the docs say net/http answers it in plain text", c.pad, body)
		}
	}
	// A submit with its body behind oversized headers: the same answer.
	code, body := fed.rawCall("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", []byte(`{"type":"noop"}`),
		map[string]string{"X-Pad": strings.Repeat("p", 10000)})
	var eb apiv1.ErrorBody
	if code != http.StatusRequestHeaderFieldsTooLarge || json.Unmarshal(body, &eb) != nil || eb.Error.Code != apiv1.CodeHeadersTooLarge {
		t.Errorf("POST /v1/tasks with a header of 10000 bytes: %d %s, want 431 headers_too_large", code, body)
	}
}
