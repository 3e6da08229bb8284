package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A task's submit span gets the task's trace id and RootSpanID; a span
// started later from TaskContext alone, in another process, is its child.
func TestSpansOfATaskLinkWithoutCarriedContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(taskIDs{}))
	tr := Tracer(tp)
	const id, tid = "01k8lc2s3c7fgr5i.0.eu-west", "4bf92f3577b34da6a3ce929d0e0e4736"

	// Submitted inside a request of another trace (a batch): the task's own
	// trace starts at its submit span.
	reqCtx, req := tr.Start(context.Background(), "request")
	StartSubmit(reqCtx, tr, id, tid, "ax.submit").End()
	req.End()
	// Later, elsewhere: only the task's id and trace id.
	_, run := tr.Start(TaskContext(context.Background(), id, tid), "ax.run")
	run.End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	sub, r := spans[0], spans[2]
	if sub.SpanContext().TraceID().String() != tid || sub.SpanContext().SpanID() != RootSpanID(id) || sub.Parent().IsValid() {
		t.Fatalf("submit span %v parent %v: want trace %s, span %s, no parent", sub.SpanContext(), sub.Parent(), tid, RootSpanID(id))
	}
	if r.Parent().SpanID() != sub.SpanContext().SpanID() || r.SpanContext().TraceID() != sub.SpanContext().TraceID() ||
		r.SpanContext().SpanID() == sub.SpanContext().SpanID() {
		t.Fatalf("run span %v parent %v: want a new span under %v", r.SpanContext(), r.Parent(), sub.SpanContext())
	}

	// Submitted with the caller's traceparent: its span stays the parent.
	parent, ok := ParseTraceparent("00-" + tid + "-00f067aa0ba902b7-01")
	if !ok {
		t.Fatal("traceparent not parsed")
	}
	StartSubmit(trace.ContextWithRemoteSpanContext(context.Background(), parent), tr, id+"x", tid, "ax.submit").End()
	if s := rec.Ended()[3]; s.Parent().SpanID() != parent.SpanID() || s.SpanContext().SpanID() != RootSpanID(id+"x") {
		t.Fatalf("submit under a traceparent: %v parent %v", s.SpanContext(), s.Parent())
	}
	for _, bad := range []string{"", "00-xyz", "01-" + tid + "-00f067aa0ba902b7-01", "00-" + tid + "-00f067aa0ba902b7"} {
		if _, ok := ParseTraceparent(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if got := Traceparent(TaskContext(context.Background(), id, tid)); got != "00-"+tid+"-"+RootSpanID(id).String()+"-01" {
		t.Errorf("Traceparent = %q", got)
	}
}
