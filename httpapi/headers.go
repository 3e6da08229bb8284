package httpapi

import (
	"fmt"
	"net/http"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// HeaderReadLimit is the http.Server's MaxHeaderBytes for an API that
// allows limit bytes of request line and headers (Config.MaxHeaderBytes):
// twice the limit, so that a request over it reaches the API and gets the
// JSON error (431 headers_too_large). net/http answers one over twice the
// limit (plus its own 4096 bytes of slack) itself, in plain text, before
// any handler runs.
func HeaderReadLimit(limit int) int { return 2 * limit }

// tooManyHeaderBytes is the 431 of a request whose request line and
// headers are over limit bytes, naming the largest header; nil when they
// are not.
func tooManyHeaderBytes(r *http.Request, limit int) *endpoint.Error {
	// As sent over HTTP/1.1: "GET /path HTTP/1.1\r\n", "Name: value\r\n"
	// per value (Host is moved out of Header), the empty line.
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + 2
	if r.Host != "" {
		n += len("Host: \r\n") + len(r.Host)
	}
	largest, most := "", 0
	for name, values := range r.Header {
		size := 0
		for _, v := range values {
			size += len(name) + len(": \r\n") + len(v)
		}
		n += size
		if size > most {
			largest, most = name, size
		}
	}
	if n <= limit {
		return nil
	}
	return &endpoint.Error{Code: apiv1.CodeHeadersTooLarge, Field: largest,
		Msg: fmt.Sprintf("request line and headers of %d bytes, over the limit of %d (http_server.max_header_bytes); the largest header is %s (%d bytes)", n, limit, largest, most)}
}
