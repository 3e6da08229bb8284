package tracing

import (
	"context"
	"crypto/sha256"

	"go.opentelemetry.io/otel/trace"
)

// A task's trace across regions nests: the sender's hand-off span is the
// parent of the request that carries the task (traceparent), the
// receiver's HTTP server span the parent of its receive span, and the
// receive span the parent of the runs in that region. The hand-off span is
// recorded once the answer is in, so its ids are drawn before the request
// (PlanSpan) and given to it when it is recorded (StartPlanned). The runs
// find the receive span from the task alone (ReceiveSpanID), as they find
// the submit span (RootSpanID).

// PlanSpan draws the ids of a span of the task's trace (traceID, 32 hex)
// that will be recorded later by StartPlanned; invalid when traceID is.
func PlanSpan(traceID string) trace.SpanContext {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: randomSpanID(), TraceFlags: trace.FlagsSampled, Remote: true})
}

// WithPlanned returns ctx carrying sc, so that Traceparent(ctx) and the
// requests sent with ctx name it as their parent; an invalid sc gives ctx.
func WithPlanned(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// StartPlanned starts the span planned as sc, a child of the span in ctx
// (which must be of sc's trace); an invalid sc starts a span of fresh ids.
func StartPlanned(ctx context.Context, tr trace.Tracer, sc trace.SpanContext, name string, opts ...trace.SpanStartOption) trace.Span {
	if sc.IsValid() {
		ctx = context.WithValue(ctx, forcedKey{}, forced{trace: sc.TraceID(), span: sc.SpanID()})
	}
	_, span := tr.Start(ctx, name, opts...)
	return span
}

// ReceiveParent is the context a receipt of a handed-off task starts its
// span from: the sender's hand-off span named by traceparent (a batch
// request carries one per task), else the span in ctx when it is of the
// task's trace (the HTTP server span of a request that carried one task),
// else the task's submit span (TaskContext).
func ReceiveParent(ctx context.Context, taskID, traceID, traceparent string) context.Context {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	if sc, ok := ParseTraceparent(traceparent); ok && sc.IsValid() && sc.TraceID() == tid {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.TraceID() == tid {
		return ctx
	}
	return TaskContext(ctx, taskID, traceID)
}

// ReceiveSpanID is the span id of the receipt of a task in region (the
// span the runs there nest under). A task received twice by one region
// (handed away and back) has two receipt spans of this id.
func ReceiveSpanID(taskID, region string) trace.SpanID {
	h := sha256.Sum256([]byte("ax-task-receive:" + region + ":" + taskID))
	var s trace.SpanID
	copy(s[:], h[:8])
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

// StartReceive starts the span of a task's receipt in region, with the id
// ReceiveSpanID, under ReceiveParent's parent. A duplicate receipt (the
// task was there already) gets a span id of its own.
func StartReceive(ctx context.Context, tr trace.Tracer, taskID, traceID, traceparent, region string, duplicate bool, opts ...trace.SpanStartOption) trace.Span {
	ctx = ReceiveParent(ctx, taskID, traceID, traceparent)
	if tid, err := trace.TraceIDFromHex(traceID); err == nil && !duplicate {
		ctx = context.WithValue(ctx, forcedKey{}, forced{trace: tid, span: ReceiveSpanID(taskID, region)})
	}
	_, span := tr.Start(ctx, "ax.handoff.receive", opts...)
	return span
}

// RunContext returns ctx with the parent of a run of the task: its receipt
// in region when the task was handed to region (received), else its
// submit span (TaskContext).
func RunContext(ctx context.Context, taskID, traceID, region string, received bool) context.Context {
	if !received {
		return TaskContext(ctx, taskID, traceID)
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: ReceiveSpanID(taskID, region),
		TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}
