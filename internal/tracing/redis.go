package tracing

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Hooks adds to c a client span per Redis command and per pipeline, as
// OpenTelemetry's database conventions name them ("EVALSHA", db.system.name
// redis). Only a command whose context already holds a span is traced: a
// request's or a task's commands join its trace, and the background loops
// (heartbeats, claims, maintenance) add none. A nil tp adds nothing.
func Hooks(c redis.UniversalClient, tp trace.TracerProvider, server string) {
	if tp == nil {
		return
	}
	c.AddHook(redisHook{tr: Tracer(tp), server: server})
}

type redisHook struct {
	tr     trace.Tracer
	server string
}

var _ redis.Hook = redisHook{}

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmd)
		}
		op := strings.ToUpper(cmd.Name())
		ctx, span := h.start(ctx, op, attribute.String("db.operation.name", op))
		err := next(ctx, cmd)
		end(span, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmds)
		}
		ctx, span := h.start(ctx, "PIPELINE", attribute.String("db.operation.name", "PIPELINE"),
			attribute.Int("db.operation.batch.size", len(cmds)))
		err := next(ctx, cmds)
		end(span, err)
		return err
	}
}

func (h redisHook) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, attribute.String("db.system.name", "redis"))
	if h.server != "" {
		attrs = append(attrs, attribute.String("server.address", h.server))
	}
	return h.tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// end ends a command's span; redis.Nil (no such key) is an answer, not an
// error.
func end(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
