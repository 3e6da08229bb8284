package tracing

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is where spans go. Tracing is on when Endpoint or the standard
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variable is set, and off when
// OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none.
type Config struct {
	// Endpoint is the collector base URL, e.g. http://otel-collector:4318
	// (http/protobuf: spans are posted to <endpoint>/v1/traces) or
	// http://otel-collector:4317 (grpc). Empty: the exporter reads the
	// standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout,
	// certificate) itself.
	Endpoint string
	// Protocol is http/protobuf or grpc; empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
	// then OTEL_EXPORTER_OTLP_PROTOCOL, then http/protobuf.
	Protocol string
	// SampleRatio of tasks whose spans are recorded, 0 < r ≤ 1. Ignored
	// when OTEL_TRACES_SAMPLER is set: the SDK follows that variable.
	SampleRatio float64
	// Service is the service.name resource ("ax-server", "ax-worker");
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
	Service string
	// Region and Instance become the ax.region and service.instance.id
	// resource attributes.
	Region, Instance string
	// Headers are sent with every export (e.g. an API key of the collector).
	Headers map[string]string
	// Getenv reads the environment; nil: os.Getenv.
	Getenv func(string) string
}

// The OTLP protocols New can export with.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

func (c Config) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

// Enabled reports whether New builds a provider that exports spans.
func (c Config) Enabled() bool {
	if strings.EqualFold(c.getenv("OTEL_SDK_DISABLED"), "true") || c.getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return c.Endpoint != "" || c.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || c.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// protocol is the OTLP protocol c exports with.
func (c Config) protocol() (string, error) {
	p := cmp.Or(c.Protocol, c.getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), c.getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), ProtocolHTTP)
	switch p {
	case ProtocolHTTP, ProtocolGRPC:
		return p, nil
	}
	return "", fmt.Errorf("tracing: protocol %q: want %s or %s", p, ProtocolHTTP, ProtocolGRPC)
}

// Provider is a tracer provider and its shutdown (which flushes).
type Provider struct {
	trace.TracerProvider
	shutdown func(context.Context) error
}

// Shutdown flushes buffered spans and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// New builds the provider of cfg: a no-op one when tracing is off
// (Config.Enabled).
func New(cfg Config) (*Provider, error) {
	if !cfg.Enabled() {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	exp, err := exporter(cfg)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(resourceOf(cfg)),
		sdktrace.WithIDGenerator(taskIDs{}),
	}
	if cfg.getenv("OTEL_TRACES_SAMPLER") == "" {
		ratio := cfg.SampleRatio
		if ratio <= 0 || ratio > 1 {
			ratio = 1
		}
		opts = append(opts, sdktrace.WithSampler(sdktrace.TraceIDRatioBased(ratio)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{TracerProvider: tp, shutdown: tp.Shutdown}, nil
}

// exporter is cfg's OTLP exporter, sending to cfg.Endpoint, else to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as it is), else to
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL: http/protobuf posts to its
// /v1/traces). The exporter reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, certificate, compression) itself.
func exporter(cfg Config) (sdktrace.SpanExporter, error) {
	proto, err := cfg.protocol()
	if err != nil {
		return nil, err
	}
	raw, whole := cfg.Endpoint, false
	if raw == "" {
		raw, whole = cfg.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), true
		if raw == "" {
			raw, whole = cfg.getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), false
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: endpoint %q: want http(s)://host:port", raw)
	}
	if !whole {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	ctx := context.Background() // the exporters dial lazily: nothing here blocks
	var exp sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(u.Scheme + "://" + u.Host)}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithTimeout(5*time.Second))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithTimeout(5*time.Second))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return exp, nil
}

// resourceOf is ax's resource, under what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say.
func resourceOf(cfg Config) *resource.Resource {
	res := resource.NewSchemaless(attribute.String("service.name", cfg.Service),
		attribute.String("service.instance.id", cfg.Instance), attribute.String("ax.region", cfg.Region))
	var env []attribute.KeyValue
	for _, kv := range strings.Split(cfg.getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			if uv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
				env = append(env, attribute.String(k, uv))
			}
		}
	}
	// The last of equal keys wins: OTEL_SERVICE_NAME over a service.name
	// in OTEL_RESOURCE_ATTRIBUTES, and both over ax's (the later resource
	// of a merge wins).
	if name := cfg.getenv("OTEL_SERVICE_NAME"); name != "" {
		env = append(env, attribute.String("service.name", name))
	}
	if merged, err := resource.Merge(res, resource.NewSchemaless(env...)); err == nil && len(env) > 0 {
		res = merged
	}
	return res
}

// Tracer is the one instrumentation scope of ax's spans.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/ax-sched/ax")
}

// TaskContext returns ctx with the task's submit span as a remote parent:
// spans started from it join the task's trace as children of its submit
// span. traceID is the task's 32-hex trace id; an invalid one gives ctx.
func TaskContext(ctx context.Context, taskID, traceID string) context.Context {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: RootSpanID(taskID),
		TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// StartSubmit starts the task's submit span: it gets the task's trace id
// (a parent in ctx of the same trace, the submitter's span, stays its
// parent; one of another trace, as a batch's request, is dropped) and the
// span id RootSpanID(taskID), so TaskContext finds it from the task alone.
// traceID is the task's 32-hex trace id; an invalid one starts a span of
// its own trace.
func StartSubmit(ctx context.Context, tr trace.Tracer, taskID, traceID, name string, opts ...trace.SpanStartOption) trace.Span {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		_, span := tr.Start(ctx, name, opts...)
		return span
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.TraceID() != tid {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	_, span := tr.Start(context.WithValue(ctx, forcedKey{}, forced{trace: tid, span: RootSpanID(taskID)}), name, opts...)
	return span
}

// RootSpanID is the span id of a task's submit span.
func RootSpanID(taskID string) trace.SpanID {
	h := sha256.Sum256([]byte("ax-task-span:" + taskID))
	var s trace.SpanID
	copy(s[:], h[:8])
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

// Traceparent is the W3C traceparent header of the span in ctx, "" when
// it has none.
func Traceparent(ctx context.Context) string {
	return TraceparentOf(trace.SpanContextFromContext(ctx))
}

// TraceparentOf is the W3C traceparent header naming sc, "" when sc is
// invalid.
func TraceparentOf(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// ParseTraceparent reads a W3C traceparent header; ok false when malformed.
func ParseTraceparent(h string) (trace.SpanContext, bool) {
	p := strings.Split(strings.TrimSpace(h), "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(p[1])
	sid, err2 := trace.SpanIDFromHex(p[2])
	fl, err3 := hex.DecodeString(p[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(fl[0]), Remote: true}), true
}

type forcedKey struct{}

type forced struct {
	trace trace.TraceID
	span  trace.SpanID
}

// taskIDs gives a submit span (SubmitContext) its task's ids and every
// other span random ones.
type taskIDs struct{}

func (taskIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedKey{}).(forced); ok {
		return f.trace, f.span
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, randomSpanID()
}

func (taskIDs) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedKey{}).(forced); ok && f.trace == traceID {
		return f.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
