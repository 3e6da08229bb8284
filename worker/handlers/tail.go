package handlers

import (
	"sync"
	"unicode/utf8"
)

// tailBytes is how much of a command's output or a response is kept: the
// end is where the answer or the error usually is.
const tailBytes = 4096

// tail is an io.Writer that keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max { // compact now and then, not on every write
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// last returns up to the last n bytes written (n ≤ max), starting on a
// UTF-8 boundary.
func (t *tail) last(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > n {
		b = b[len(b)-n:]
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return string(b)
}

// String returns the whole kept tail.
func (t *tail) String() string { return t.last(t.max) }
