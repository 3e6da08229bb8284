package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// errWriteDeadline ends a request's context when it would outlive the
// server's write deadline.
var errWriteDeadline = errors.New("the request did not finish within http_server.write_timeout")

// withWriteDeadline answers 503 unavailable with Retry-After for a request
// still unanswered shortly before the server's write deadline (and ends its
// context), instead of letting the deadline pass and the connection close
// with no answer at all, as it would for a handler held by a frozen
// dependency. A handler that moves its write deadline (long-polls, event
// streams, through http.ResponseController) moves this one with it. d <= 0:
// none.
func withWriteDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	// Room to write the 503 before the connection's own deadline.
	margin := min(max(d/20, 50*time.Millisecond), 500*time.Millisecond)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		dw := &deadlineWriter{w: w, h: http.Header{}, margin: margin, cancel: cancel}
		dw.mu.Lock()
		dw.arm(d - margin)
		dw.mu.Unlock()
		h.ServeHTTP(dw, r.WithContext(ctx))
		dw.mu.Lock()
		dw.done = true
		dw.timer.Stop()
		if !dw.wrote && !dw.timedOut {
			dw.commit(http.StatusOK) // what net/http sends for a handler that wrote nothing
		}
		dw.mu.Unlock()
	})
}

// deadlineWriter is the ResponseWriter of withWriteDeadline. The handler
// has a header map of its own, copied out when it writes its status, so the
// 503 can be written from the timer without racing it; after the 503 the
// handler's writes fail with http.ErrHandlerTimeout.
type deadlineWriter struct {
	w      http.ResponseWriter
	h      http.Header
	margin time.Duration
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	timer    *time.Timer
	gen      int  // which timer is current: one that fired before a move does nothing
	wrote    bool // the handler's status line is out (or the connection hijacked)
	timedOut bool // the 503 is out
	done     bool // ServeHTTP returned
}

// arm starts the timer of the current deadline; mu held.
func (d *deadlineWriter) arm(after time.Duration) {
	d.gen++
	g := d.gen
	d.timer = time.AfterFunc(after, func() { d.expire(g) })
}

func (d *deadlineWriter) expire(gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done || gen != d.gen {
		return
	}
	if !d.wrote {
		d.timedOut = true
		b, _ := json.Marshal(apiv1.ErrorBody{Error: apiv1.Error{Code: apiv1.CodeUnavailable,
			Message: errWriteDeadline.Error() + ": a dependency is slow or unavailable, retry later", RetryAfterSeconds: 5}})
		hd := d.w.Header()
		hd.Set("Content-Type", "application/json")
		hd.Set("Retry-After", "5")
		hd.Set("Connection", "close")
		// Complete without the handler's return, which can take a while
		// yet (its calls to the frozen dependency wait out their timeouts).
		hd.Set("Content-Length", strconv.Itoa(len(b)+1))
		d.w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = d.w.Write(append(b, '\n'))
		if f, ok := d.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	// The handler's answer (or the rest of it) can no longer be sent.
	d.cancel(errWriteDeadline)
}

func (d *deadlineWriter) Header() http.Header { return d.h }

// commit sends the handler's headers and status; mu held.
func (d *deadlineWriter) commit(code int) {
	d.wrote = true
	hd := d.w.Header()
	for k, v := range d.h {
		hd[k] = v
	}
	d.w.WriteHeader(code)
}

func (d *deadlineWriter) WriteHeader(code int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timedOut || d.wrote {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// An informational answer: headers so far, the real one later.
		hd := d.w.Header()
		for k, v := range d.h {
			hd[k] = v
		}
		d.w.WriteHeader(code)
		return
	}
	d.commit(code)
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if !d.wrote {
		d.commit(http.StatusOK)
	}
	return d.w.Write(b)
}

func (d *deadlineWriter) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timedOut {
		return
	}
	if !d.wrote {
		d.commit(http.StatusOK)
	}
	if f, ok := d.w.(http.Flusher); ok {
		f.Flush()
	}
}

// SetWriteDeadline (through http.ResponseController) moves the connection's
// write deadline and this request's with it; zero: none.
func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	if !d.timedOut && !d.done {
		d.timer.Stop()
		d.gen++
		if !t.IsZero() {
			d.arm(time.Until(t) - d.margin)
		}
	}
	d.mu.Unlock()
	return http.NewResponseController(d.w).SetWriteDeadline(t)
}

// Hijack hands the connection over: nothing is written here after it.
func (d *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timedOut {
		return nil, nil, http.ErrHandlerTimeout
	}
	c, rw, err := http.NewResponseController(d.w).Hijack()
	if err == nil {
		d.wrote = true
		d.timer.Stop()
		d.gen++
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines, full duplex).
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.w }
