package e2e

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSpan is one span a collector received, with its process.
type otlpSpan struct {
	Name, Service, Region     string
	TraceID, SpanID, ParentID string
	Attrs                     map[string]string
	StartNanos, EndNanos      uint64
}

// otlpCollector is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf),
// what ax's servers and workers export to when tracing.endpoint is set.
type otlpCollector struct {
	URL   string
	mu    sync.Mutex
	spans []otlpSpan
}

func startOTLP(t *testing.T) *otlpCollector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &otlpCollector{URL: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		b, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err != nil || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

func (c *otlpCollector) add(req *collectortrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = kv.GetValue().GetStringValue()
				}
				c.spans = append(c.spans, otlpSpan{Name: s.Name, Service: res["service.name"], Region: res["ax.region"],
					TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentID: hex.EncodeToString(s.ParentSpanId), Attrs: attrs,
					StartNanos: s.StartTimeUnixNano, EndNanos: s.EndTimeUnixNano})
			}
		}
	}
}

// trace returns the spans received so far of one trace.
func (c *otlpCollector) trace(id string) []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []otlpSpan
	for _, s := range c.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}
