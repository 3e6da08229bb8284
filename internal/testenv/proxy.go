package testenv

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of etcd that can stall (stop moving bytes
// while keeping connections open, like a frozen host or a black-holed
// route) or go down (drop every connection and refuse new ones).
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	down   bool
	closed bool
	conns  map[net.Conn]struct{}
}

// StartProxy starts a proxy to endpoint (host:port or http://host:port);
// t.Cleanup closes it.
func StartProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(endpoint, "http://"), conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's address as an etcd endpoint (http://host:port).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		p.mu.Lock()
		if err != nil || p.down || p.closed {
			p.mu.Unlock()
			_ = in.Close()
			if out != nil {
				_ = out.Close()
			}
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.flowing() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// flowing waits while the proxy is frozen; false once it is closed.
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	f()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Freeze stops moving bytes, keeping connections open (a black-holed route).
func (p *Proxy) Freeze() { p.set(func() { p.frozen = true }) }

// Thaw moves bytes again.
func (p *Proxy) Thaw() { p.set(func() { p.frozen = false }) }

// Down drops every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.set(func() {
		p.down = true
		for c := range p.conns {
			_ = c.Close()
			delete(p.conns, c)
		}
	})
}

// Up accepts connections again.
func (p *Proxy) Up() { p.set(func() { p.down = false }) }

func (p *Proxy) close() {
	p.set(func() {
		p.closed = true
		for c := range p.conns {
			_ = c.Close()
		}
	})
	_ = p.ln.Close()
	p.wg.Wait()
}
