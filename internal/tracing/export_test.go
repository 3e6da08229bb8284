package tracing

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// received is what a test collector got: span name → its span id, parent
// id, resource service.name and attributes.
type received struct {
	mu    sync.Mutex
	spans map[string]rspan
}

type rspan struct {
	id, parent, service string
	attrs               map[string]string
}

func (r *received) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = kv.GetValue().GetStringValue()
				}
				r.spans[s.Name] = rspan{id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), service: service, attrs: attrs}
			}
		}
	}
}

func (r *received) get(name string) (rspan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.spans[name]
	return s, ok
}

type grpcCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	r *received
}

func (g grpcCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// collector starts an OTLP receiver of protocol and returns its base URL.
func collector(t *testing.T, protocol string) (string, *received) {
	r := &received{spans: map[string]rspan{}}
	if protocol == ProtocolGRPC {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(s, grpcCollector{r: r})
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
		return "http://" + ln.Addr().String(), r
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var in collectortrace.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(b, &in) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		r.add(&in)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, r
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestStandardVariables: with only the standard OTEL_ variables, spans go
// over either protocol to the collector they name, under the service name
// they give: an HTTP server span named by its route, the child of the
// request's traceparent, and a span per Redis command made within it.
func TestStandardVariables(t *testing.T) {
	rdb := testenv.StartRedis(t).Client()
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			url, got := collector(t, protocol)
			cfg := Config{Service: "ax-server", SampleRatio: 1, Getenv: envOf(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_SERVICE_NAME": "ax-eu"})}
			if !cfg.Enabled() {
				t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT alone does not turn tracing on")
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := rdb.WithTimeout(5 * time.Second)
			Hooks(c, p, "127.0.0.1")
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
				NameRoute(r.Context(), "POST /v1/things/{id}")
				if err := c.Set(r.Context(), "thing", "x", 0).Err(); err != nil {
					t.Error(err)
				}
				c.Get(context.Background(), "thing") // no span in its context: not traced
				w.WriteHeader(http.StatusAccepted)
			})
			req := httptest.NewRequest(http.MethodPost, "/v1/things/7", strings.NewReader("{}"))
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			rec := httptest.NewRecorder()
			Handler(p, mux).ServeHTTP(rec, req)
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status %d", rec.Code)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			srv, ok := got.get("POST /v1/things/{id}")
			if !ok || srv.parent != "00f067aa0ba902b7" || srv.service != "ax-eu" || srv.attrs["http.route"] != "/v1/things/{id}" {
				t.Fatalf("server span %+v (found %v): want the traceparent's child, service ax-eu, route /v1/things/{id}", srv, ok)
			}
			set, ok := got.get("SET")
			if !ok || set.parent != srv.id || set.attrs["db.system.name"] != "redis" {
				t.Fatalf("SET span %+v (found %v): want a redis span under %s", set, ok, srv.id)
			}
			if _, ok := got.get("GET"); ok {
				t.Fatal("a command outside any trace got a span")
			}
		})
	}
}

func TestEnabledAndProtocol(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		env     map[string]string
		enabled bool
		err     string
	}{
		{Config{}, nil, false, ""},
		{Config{Endpoint: "http://c:4318"}, nil, true, ""},
		{Config{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, ""},
		{Config{Endpoint: "http://c:4318"}, map[string]string{"OTEL_SDK_DISABLED": "true"}, false, ""},
		{Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, `protocol "http/json"`},
		{Config{Endpoint: "http://c:4317", Protocol: "grpc"}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, ""},
		{Config{Endpoint: "c:4318"}, nil, true, "want http(s)://host:port"},
	} {
		c.cfg.Getenv = envOf(c.env)
		if got := c.cfg.Enabled(); got != c.enabled {
			t.Errorf("%+v %v: enabled %v", c.cfg, c.env, got)
			continue
		}
		p, err := New(c.cfg)
		switch {
		case c.err == "" && err != nil, c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v %v: %v, want %q", c.cfg, c.env, err, c.err)
		case err == nil:
			_ = p.Shutdown(context.Background())
		}
	}
}
