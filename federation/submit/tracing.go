package submit

import (
	"context"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// A stored task's submit span (internal/tracing links it to the task's
// later spans): placement decided, stored. Without a tracer provider
// nothing is recorded.

// traceSubmit records a stored task's submit span, from the start of its
// placement to its storing.
func (n *Pipeline) traceSubmit(ctx context.Context, start, end time.Time, id string, sp *task.Spec, nt queue.NewTask, d placement.Decision) {
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
