package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps next in an HTTP server span per request, the child of the
// request's W3C traceparent when it carries one; handlers find the span in
// the request's context (a submit's becomes its task's trace). A nil tp
// returns next as it is. The span is named by the method until the router
// names it by its route (NameRoute).
func Handler(tp trace.TracerProvider, next http.Handler) http.Handler {
	if tp == nil {
		return next
	}
	tr := Tracer(tp)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if sc, ok := ParseTraceparent(r.Header.Get("traceparent")); ok && sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
		ctx, span := tr.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
			attribute.String("network.protocol.version", strings.TrimPrefix(r.Proto, "HTTP/")),
			attribute.String("user_agent.original", r.UserAgent())))
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
			if sw.code >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.code))
			}
			span.End()
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// NameRoute names the HTTP server span of ctx by the route that serves it
// ("POST /v1/tasks/{id}/cancel"), as OpenTelemetry's HTTP conventions ask;
// without one it does nothing.
func NameRoute(ctx context.Context, pattern string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetName(pattern)
	if _, route, ok := strings.Cut(pattern, " "); ok {
		span.SetAttributes(attribute.String("http.route", route))
	}
}

// statusWriter records the status written; Flush and Unwrap keep what the
// writer underneath can do (event streams flush, 401s hijack).
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
