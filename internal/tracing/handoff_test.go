package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A hand-off's spans nest with nothing carried but the task's ids and the
// request's traceparent: the planned hand-off span, recorded after the
// answer, is the parent of the receiver's request span; the receipt is
// the child of that span (one task a request) or of the item's
// traceparent (a batch, whose request is of another trace); a run in the
// receiving region is the receipt's child, a run at home the submit's.
func TestHandOffSpansNest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(taskIDs{}))
	tr := Tracer(tp)
	const id, tid, other = "01k8lc2s3c7fgr5i.0.us-east-1", "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"

	planned := PlanSpan(tid)
	if !planned.IsValid() || planned.TraceID().String() != tid || PlanSpan("nope").IsValid() {
		t.Fatalf("PlanSpan: %v", planned)
	}
	// The request carries the planned span before it is recorded.
	header := Traceparent(WithPlanned(context.Background(), planned))
	sc, ok := ParseTraceparent(header)
	if !ok || sc.SpanID() != planned.SpanID() || header != TraceparentOf(planned) {
		t.Fatalf("traceparent %q of the planned span %v", header, planned)
	}
	// The receiver: its HTTP server span under the header, the receipt under that.
	reqCtx, req := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), sc), "POST /v1/internal/handoff")
	StartReceive(reqCtx, tr, id, tid, "", "eu-west-1", false).End()
	req.End()
	// The sender records its span once answered, with the planned ids.
	StartPlanned(TaskContext(context.Background(), id, tid), tr, planned, "ax.handoff").End()
	// The run in eu-west-1, from the task's ids alone; one at home.
	_, run := tr.Start(RunContext(context.Background(), id, tid, "eu-west-1", true), "ax.run")
	run.End()
	_, home := tr.Start(RunContext(context.Background(), id, tid, "us-east-1", false), "ax.run home")
	home.End()

	s := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		s[sp.Name()] = sp
	}
	chain := []struct{ name, parent string }{
		{"ax.handoff", RootSpanID(id).String()},
		{"POST /v1/internal/handoff", planned.SpanID().String()},
		{"ax.handoff.receive", s["POST /v1/internal/handoff"].SpanContext().SpanID().String()},
		{"ax.run", ReceiveSpanID(id, "eu-west-1").String()},
		{"ax.run home", RootSpanID(id).String()},
	}
	for _, c := range chain {
		sp := s[c.name]
		if sp == nil || sp.Parent().SpanID().String() != c.parent || sp.SpanContext().TraceID().String() != tid {
			t.Fatalf("%s: %v; want a child of %s in trace %s", c.name, sp, c.parent, tid)
		}
	}
	if s["ax.handoff"].SpanContext().SpanID() != planned.SpanID() || s["ax.handoff.receive"].SpanContext().SpanID() != ReceiveSpanID(id, "eu-west-1") {
		t.Fatal("the hand-off or the receipt did not get its planned id")
	}

	// A batch: the request is of another trace, the item names the span.
	bctx, batch := tr.Start(context.Background(), "POST /v1/internal/handoff/batch", trace.WithNewRoot())
	p2 := PlanSpan(tid)
	StartReceive(bctx, tr, id, tid, TraceparentOf(p2), "ap-south-1", false).End()
	// A duplicate receipt: a span id of its own. A traceparent of another
	// trace, and no span of the task's trace in ctx: the submit span.
	StartReceive(bctx, tr, id, tid, "00-"+other+"-00f067aa0ba902b7-01", "ap-south-1", true).End()
	batch.End()
	ended := rec.Ended()
	got, dup := ended[len(ended)-3], ended[len(ended)-2]
	if got.Parent().SpanID() != p2.SpanID() || got.SpanContext().SpanID() != ReceiveSpanID(id, "ap-south-1") {
		t.Fatalf("receipt in a batch: %v parent %v; want a child of the item's %v", got.SpanContext(), got.Parent(), p2)
	}
	if dup.Parent().SpanID() != RootSpanID(id) || dup.SpanContext().SpanID() == ReceiveSpanID(id, "ap-south-1") {
		t.Fatalf("duplicate receipt: %v parent %v", dup.SpanContext(), dup.Parent())
	}
}
