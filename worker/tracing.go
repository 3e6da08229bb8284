package worker

import (
	"context"
	"errors"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startRun starts the attempt's span: a child of the task's receipt in
// this region when another region handed it here (its id names its home),
// else of its submit span.
func (w *Worker) startRun(ctx context.Context, j *job) (context.Context, trace.Span) {
	if w.opts.TracerProvider == nil {
		return ctx, trace.SpanFromContext(ctx) // records nothing; the hot path stays as it was
	}
	t := j.task
	region := w.store.Options().Region
	home, err := task.ParseID(t.ID)
	received := err == nil && region != "" && home.Region != region
	return w.tracer.Start(tracing.RunContext(ctx, t.ID, t.TraceID, region, received), "ax.run "+t.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("ax.task.id", t.ID), attribute.String("ax.task.type", t.Type),
			attribute.Int("ax.attempt", t.Attempt), attribute.String("ax.pool", w.opts.Pool),
			attribute.String("ax.worker", w.opts.ID), attribute.String("ax.region", w.store.Options().Region)))
}

// endRun ends it with the attempt's outcome.
func endRun(span trace.Span, err, cause error) {
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.Bool("ax.retryable", !errors.Is(err, ErrNonRetryable)))
	case cause != nil:
		span.SetStatus(codes.Error, cause.Error())
	}
	span.End()
}
