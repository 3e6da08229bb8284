package netem

import (
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is one emulated link: a TCP listener on the loopback interface
// whose connections are relayed to a target through the Link's delays,
// stalls and resets. Point a process at Addr (or URL) instead of the
// target.
type Proxy struct {
	ln *net.TCPListener
	wg sync.WaitGroup

	mu          sync.Mutex
	cond        *sync.Cond
	link        Link
	rng         *rand.Rand
	target      string // "" until SetTarget
	partitioned bool
	closed      bool
	conns       map[*relay]struct{}
	fillers     []net.Conn      // our own connections filling the accept queue in a partition
	fillerAddrs map[string]bool // their local addresses, to drop them when they are accepted

	segments, lost atomic.Int64
}

// Start listens on a free loopback port and relays to target (host:port,
// or http://host:port); an empty target waits for SetTarget, so a proxy
// can stand in front of a process that picks its own port.
func Start(target string, l Link) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln.(*net.TCPListener), link: l, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		conns: map[*relay]struct{}{}, fillerAddrs: map[string]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.SetTarget(target)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is Addr as an http URL (an etcd endpoint, an ax public_addr).
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// SetTarget sets where connections go (host:port or http://host:port);
// connections accepted before it wait for it.
func (p *Proxy) SetTarget(target string) {
	target = strings.TrimPrefix(strings.TrimPrefix(target, "http://"), "https://")
	p.set(func() { p.target = target })
}

// SetLink changes the link for the segments relayed from now on.
func (p *Proxy) SetLink(l Link) { p.set(func() { p.link = l }) }

// Stats are how many segments the proxy relayed and how many of them it
// delayed as lost.
func (p *Proxy) Stats() (segments, lost int64) { return p.segments.Load(), p.lost.Load() }

// Partition cuts the link without a word: new connections get no answer
// to their SYN (on Linux; elsewhere they connect and hear nothing), and
// the bytes of open ones are held until Heal, as a black-holed route
// holds them (TCP would retransmit them after the heal). Cut resets the
// open ones instead.
func (p *Proxy) Partition() {
	p.mu.Lock()
	if p.partitioned || p.closed {
		p.mu.Unlock()
		return
	}
	p.partitioned = true
	p.cond.Broadcast()
	p.mu.Unlock()
	// Stop a pending Accept, shrink the accept queue to one connection and
	// fill it: the kernel then drops every SYN.
	_ = p.ln.SetDeadline(time.Now())
	if dropSYNs(p.ln) {
		for range 3 {
			c, err := net.DialTimeout("tcp", p.Addr(), 100*time.Millisecond)
			if err != nil {
				break // the queue is full: SYNs are dropped
			}
			p.mu.Lock()
			p.fillers = append(p.fillers, c)
			p.fillerAddrs[c.LocalAddr().String()] = true
			p.mu.Unlock()
		}
	}
}

// Heal ends a partition: held bytes flow, new connections are accepted.
func (p *Proxy) Heal() {
	acceptSYNs(p.ln)
	p.mu.Lock()
	fillers := p.fillers
	p.fillers = nil
	p.mu.Unlock()
	for _, c := range fillers {
		_ = c.Close()
	}
	_ = p.ln.SetDeadline(time.Time{})
	p.set(func() { p.partitioned = false })
}

// Cut resets every open connection (RST both ways); new ones are
// accepted unless the link is partitioned.
func (p *Proxy) Cut() {
	p.mu.Lock()
	rs := make([]*relay, 0, len(p.conns))
	for r := range p.conns {
		rs = append(rs, r)
	}
	p.mu.Unlock()
	for _, r := range rs {
		r.reset()
	}
}

// Close stops the proxy and resets its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cond.Broadcast()
	fillers := p.fillers
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range fillers {
		_ = c.Close()
	}
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	f()
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for p.partitioned && !p.closed {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // a partition began
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		filler := p.fillerAddrs[c.RemoteAddr().String()]
		delete(p.fillerAddrs, c.RemoteAddr().String())
		p.mu.Unlock()
		if filler {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.relay(c.(*net.TCPConn))
	}
}

// waitTarget is the target once known; "" once the proxy is closed.
func (p *Proxy) waitTarget() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.target == "" && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return ""
	}
	return p.target
}

// flowing waits while the link is partitioned; false once it is closed.
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.partitioned && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// draw returns one segment's transit time and the current link.
func (p *Proxy) draw() (time.Duration, Link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.link
	d := l.transit(p.rng)
	p.segments.Add(1)
	if d > l.Delay+l.Jitter {
		p.lost.Add(1)
	}
	return d, l
}
