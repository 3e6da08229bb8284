package handoff

import (
	"context"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Spans of a task's hand-off (internal/tracing links them): each hand-off
// request this region sends, and its receipt from another region. Without
// a tracer provider nothing is recorded.

// traceHandOff records one span per task of a hand-off request to target.
func (n *env) traceHandOff(start time.Time, target string, as []answer) {
	if n.cfg.TracerProvider == nil {
		return
	}
	end := n.cfg.Now()
	for _, a := range as {
		ctx := tracing.TaskContext(context.Background(), a.t.ID, a.t.TraceID)
		_, span := n.tracer.Start(ctx, "ax.handoff", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("ax.task.id", a.t.ID), attribute.String("ax.region", n.cfg.Region),
				attribute.String("ax.handoff.target", target), attribute.String("ax.handoff.outcome", a.v.String())))
		if a.err != nil {
			span.SetStatus(codes.Error, a.err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
}

// traceReceived records the receipt of a task handed off to this region.
func (n *env) traceReceived(ctx context.Context, start time.Time, id string, sp *task.Spec, st task.State, dup bool) {
	if n.cfg.TracerProvider == nil {
		return
	}
	traceID := sp.TraceID
	if traceID == "" {
		traceID = task.TraceIDFor(id)
	}
	_, span := n.tracer.Start(tracing.TaskContext(ctx, id, traceID), "ax.handoff.receive", trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ax.task.id", id), attribute.String("ax.region", n.cfg.Region),
			attribute.String("ax.task.state", string(st)),
			attribute.Bool("ax.handoff.duplicate", dup)))
	span.End()
}

func (v verdict) String() string {
	switch v {
	case handedOff:
		return "accepted"
	case refused:
		return "refused"
	default:
		return "unanswered"
	}
}
