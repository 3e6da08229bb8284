package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// A request's request line and headers are counted as they were sent: at
// exactly max_header_bytes it is served, one byte more is the JSON 431
// naming the largest header (all of a repeated header's lines counted).
func TestHeadersOverTheLimitAreTheJSON431(t *testing.T) {
	const limit = 4096
	raw := func(pad int) string {
		return "GET /healthz HTTP/1.1\r\nHost: ax.example\r\nCookie: a=1\r\nCookie: b=2\r\nX-Pad: " +
			strings.Repeat("p", pad) + "\r\n\r\n"
	}
	base := len(raw(0))
	a := New(nil, Config{MaxHeaderBytes: limit})
	for _, c := range []struct {
		wire  string
		code  int
		field string
	}{
		{raw(limit - base), http.StatusOK, ""},
		{raw(limit - base + 1), http.StatusRequestHeaderFieldsTooLarge, "X-Pad"},
		{"GET /healthz HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("Cookie: "+strings.Repeat("c", 100)+"\r\n", 40) +
			"X-One: " + strings.Repeat("o", 1000) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge, "Cookie"},
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.wire)))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, r)
		if rec.Code != c.code {
			t.Fatalf("%d bytes of request line and headers (limit %d): %d %s, want %d", len(c.wire), limit, rec.Code, rec.Body, c.code)
		}
		if c.code == http.StatusOK {
			continue
		}
		var eb apiv1.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != apiv1.CodeHeadersTooLarge ||
			eb.Error.Field != c.field || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%d bytes of headers: %s (%s), want the JSON error headers_too_large with field %s",
				len(c.wire), rec.Body, rec.Header().Get("Content-Type"), c.field)
		}
		if rec.Header().Get("Connection") != "close" {
			t.Errorf("the 431 keeps the connection open (Connection %q)", rec.Header().Get("Connection"))
		}
	}
}
