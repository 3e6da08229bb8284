package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewLogger writes to stderr: text on a terminal, JSON otherwise (what log
// collectors read); AX_LOG_FORMAT=text or json chooses. Durations are
// written as Go durations ("1.5s"), not nanoseconds.
func NewLogger(level slog.Level) *slog.Logger {
	l := logTo(os.Stderr, logText(os.Getenv("AX_LOG_FORMAT"), os.Stderr), level)
	useRedisLog(l)
	return l
}

// LogIsText says whether NewLogger writes text: AX_LOG_FORMAT=text, or
// stderr is a terminal and AX_LOG_FORMAT does not ask for json.
func LogIsText() bool { return logText(os.Getenv("AX_LOG_FORMAT"), os.Stderr) }

// LogOnTerminal says whether the log goes to a terminal by default: stderr
// is one and AX_LOG_FORMAT chooses no format.
func LogOnTerminal() bool { return os.Getenv("AX_LOG_FORMAT") == "" && logText("", os.Stderr) }

// useRedisLog sends the Redis client's messages (process-wide) to l.
func useRedisLog(l *slog.Logger) { redis.SetLogger(redisLogger{l.With("component", "redis")}) }

// redisLogger puts the Redis client's own messages (a pool that cannot
// dial, a failover) in ax's log at WARN, in its format, so that a log
// collector reading JSON gets them whole.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}

func logTo(w io.Writer, text bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	if text {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// logText: the format asked for, else text when f is a terminal.
func logText(format string, f *os.File) bool {
	switch format {
	case "text":
		return true
	case "json":
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
