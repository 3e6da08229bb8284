package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ax-sched/ax/httpapi/endpoint"
)

// failLogEvery is how often an outage's failed requests are told at WARN.
const failLogEvery = 10 * time.Second

// failLog writes the causes of the answers whose cause the caller is not
// told (hidden: the message names a ref). A 500 is a bug: ERROR, every one.
// A 502 or 503 is an outage (Redis out, a peer's unusable answers), whose
// every request failed with the same cause: one WARN line per status every
// 10 s, with the number answered so since the last one ("suppressed"),
// and each at DEBUG (its ref, for a caller who quotes it). The outage
// itself is logged by whatever sees it (the Redis gate: WARN as it closes,
// INFO as it opens).
type failLog struct {
	log *slog.Logger
	now func() time.Time

	mu  sync.Mutex
	per map[int]*failWindow // by status
}

type failWindow struct {
	next       time.Time // the next WARN line is due from then
	suppressed int       // answered since the last WARN line
}

func newFailLog(l *slog.Logger) *failLog {
	return &failLog{log: l, now: time.Now, per: map[int]*failWindow{}}
}

// failed logs e's cause, if hidden, for a request to route.
func (f *failLog) failed(ctx context.Context, route string, e *endpoint.Error) {
	if e.Ref == "" {
		return
	}
	attrs := []any{"route", route, "status", e.Status(), "ref", e.Ref, "err", e.Detail}
	if e.Status() == 500 {
		f.log.ErrorContext(ctx, "request failed", attrs...)
		return
	}
	f.mu.Lock()
	w := f.per[e.Status()]
	if w == nil {
		w = &failWindow{}
		f.per[e.Status()] = w
	}
	now := f.now()
	if now.Before(w.next) {
		w.suppressed++
		f.mu.Unlock()
		f.log.DebugContext(ctx, "request failed", attrs...)
		return
	}
	n := w.suppressed
	w.suppressed, w.next = 0, now.Add(failLogEvery)
	f.mu.Unlock()
	f.log.WarnContext(ctx, "request failed", append(attrs, "suppressed", n)...)
}
