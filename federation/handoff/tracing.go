package handoff

import (
	"context"
	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Spans of a task's hand-off (internal/tracing links them): each hand-off
// request this region sends, and its receipt from another region. Without
// a tracer provider nothing is recorded.

// handOffSpans are the hand-off spans of one request's tasks by task id,
// planned before it is sent (tracing.PlanSpan) and recorded once it is
// answered (traceHandOff); nil without a tracer provider.
type handOffSpans map[string]trace.SpanContext

// planHandOffs plans a hand-off span for each of tasks.
func (n *env) planHandOffs(tasks []*task.Task) handOffSpans {
	if n.cfg.TracerProvider == nil {
		return nil
	}
	spans := make(handOffSpans, len(tasks))
	for _, t := range tasks {
		if sc := tracing.PlanSpan(t.TraceID); sc.IsValid() {
			spans[t.ID] = sc
		}
	}
	return spans
}

// items are a batch request's items, each naming its task's hand-off span
// (traceparent): a copy, so that the items sent one per request after a
// batch was refused carry no field an older receiver would refuse (one
// request carries its span in its header).
func (s handOffSpans) items(items []apiv1.HandOff) []apiv1.HandOff {
	if len(s) == 0 {
		return items
	}
	out := slices.Clone(items)
	for i := range out {
		if sc, ok := s[out[i].ID]; ok {
			out[i].Traceparent = tracing.TraceparentOf(sc)
		}
	}
	return out
}

// traceHandOff records the planned span of each task of a hand-off request
// to target, a child of the task's submit span.
func (n *env) traceHandOff(start time.Time, target string, as []answer, spans handOffSpans) {
	if n.cfg.TracerProvider == nil {
		return
	}
	end := n.cfg.Now()
	for _, a := range as {
		ctx := tracing.TaskContext(context.Background(), a.t.ID, a.t.TraceID)
		span := tracing.StartPlanned(ctx, n.tracer, spans[a.t.ID], "ax.handoff", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("ax.task.id", a.t.ID), attribute.String("ax.region", n.cfg.Region),
				attribute.String("ax.handoff.target", target), attribute.String("ax.handoff.outcome", a.v.String())))
		if a.err != nil {
			span.SetStatus(codes.Error, a.err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
}

// traceReceived records the receipt of a task handed off to this region:
// a child of the sender's hand-off span (the item's traceparent, or the
// request's), with the span id the runs here nest under.
func (n *env) traceReceived(ctx context.Context, start time.Time, h *apiv1.HandOff, sp *task.Spec, st task.State, dup bool) {
	if n.cfg.TracerProvider == nil {
		return
	}
	traceID := sp.TraceID
	if traceID == "" {
		traceID = task.TraceIDFor(h.ID)
	}
	span := tracing.StartReceive(ctx, n.tracer, h.ID, traceID, h.Traceparent, n.cfg.Region, dup, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ax.task.id", h.ID), attribute.String("ax.region", n.cfg.Region),
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
