package netem

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// relay is one proxied connection: in (accepted) and out (to the target),
// a delayed pipe each way.
type relay struct {
	in, out    *net.TCPConn
	resetAfter int64 // segments before a reset; 0: never
	segments   atomic.Int64
	halves     atomic.Int32 // directions ended cleanly (EOF passed on)
	done       chan struct{}
	once       sync.Once
}

// segment is one read's bytes, due at the far end at due.
type segment struct {
	b   []byte
	due time.Time
}

func (p *Proxy) relay(in *net.TCPConn) {
	defer p.wg.Done()
	target := p.waitTarget()
	if target == "" {
		_ = in.Close()
		return
	}
	c, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		// The target refuses: so does the link.
		_ = in.SetLinger(0)
		_ = in.Close()
		return
	}
	r := &relay{in: in, out: c.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		r.reset()
		return
	}
	r.resetAfter = int64(p.link.resetAfter(p.rng))
	p.conns[r] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(r, r.out, r.in)
	go p.pipe(r, r.in, r.out)
	<-r.done
	p.mu.Lock()
	delete(p.conns, r)
	p.mu.Unlock()
}

// pipe moves src's bytes to dst, each read delivered after its transit
// time and never before an earlier one (TCP's order).
func (p *Proxy) pipe(r *relay, dst, src *net.TCPConn) {
	defer p.wg.Done()
	q := make(chan segment, 256)
	var readErr error // set before q closes
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(q)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				d, _ := p.draw()
				due := time.Now().Add(d)
				if due.Before(last) {
					due = last
				}
				last = due
				select {
				case q <- segment{buf[:n], due}:
				case <-r.done:
					return
				}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	for s := range q {
		if w := time.Until(s.due); w > 0 {
			t := time.NewTimer(w)
			select {
			case <-t.C:
			case <-r.done:
				t.Stop()
				return
			}
		}
		if !p.flowing() {
			r.close()
			return
		}
		if _, err := dst.Write(s.b); err != nil {
			r.close()
			return
		}
		if n := r.segments.Add(1); r.resetAfter > 0 && n >= r.resetAfter {
			r.reset()
			return
		}
	}
	if !errors.Is(readErr, io.EOF) {
		r.reset() // src was reset or failed: so is dst
		return
	}
	// src ended: pass the half-close on; the relay ends with both halves.
	if dst.CloseWrite() != nil || r.halves.Add(1) == 2 {
		r.close()
	}
}

// close ends the relay once both pipes are done or one failed.
func (r *relay) close() {
	r.once.Do(func() {
		close(r.done)
		_ = r.in.Close()
		_ = r.out.Close()
	})
}

// reset ends the relay with an RST on both sides.
func (r *relay) reset() {
	_ = r.in.SetLinger(0)
	_ = r.out.SetLinger(0)
	r.close()
}
