package federation

import (
	"context"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Spans of a task this node touches (internal/tracing links them): its
// submit span (placement decided, stored), each hand-off it sends, and its
// receipt from another region. A node without a tracer provider records
// nothing.

// traceSubmit records a stored task's submit span, from the start of its
// placement to its storing.
func (n *Node) traceSubmit(ctx context.Context, start, end time.Time, id string, sp *task.Spec, nt queue.NewTask, d placement.Decision) {
	if n.cfg.TracerProvider == nil {
		return
	}
	traceID := sp.TraceID
	if traceID == "" {
		traceID = task.TraceIDFor(id)
	}
	attrs := []attribute.KeyValue{attribute.String("ax.task.id", id), attribute.String("ax.task.type", sp.Type),
		attribute.String("ax.tenant", sp.Tenant), attribute.String("ax.region", n.cfg.Region)}
	switch {
	case d.OK:
		attrs = append(attrs, attribute.String("ax.placement.region", d.Region), attribute.String("ax.placement.pool", d.Pool),
			attribute.Float64("ax.placement.cost_usd", d.Cost), attribute.Float64("ax.placement.wait_seconds", d.Wait.Seconds()))
	case sp.RunAt != nil:
		attrs = append(attrs, attribute.String("ax.run_at", sp.RunAt.UTC().Format(time.RFC3339Nano)))
	default:
		attrs = append(attrs, attribute.String("ax.placement.outcome", "NO_CAPACITY"))
	}
	if nt.HandOff != "" {
		attrs = append(attrs, attribute.String("ax.handoff.target", nt.HandOff))
	}
	span := tracing.StartSubmit(ctx, n.tracer, id, traceID, "ax.submit", trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

// traceHandOff records one span per task of a hand-off request to target.
func (n *Node) traceHandOff(start time.Time, target string, as []answer) {
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
func (n *Node) traceReceived(ctx context.Context, start time.Time, id string, sp *task.Spec, st task.State, dup bool) {
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
