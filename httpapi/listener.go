package httpapi

import (
	"context"
	"net"
	"sync"
	"time"
)

// ListenerOptions bounds the connections a Listener accepts.
type ListenerOptions struct {
	// Max caps open connections: Accept waits while Max are open (the
	// rest stay in the kernel's backlog), so idle keep-alives or slow
	// clients cannot take every file descriptor.
	Max int
	// PerClient (0: no cap) caps the open connections of one client IP:
	// one beyond it is closed as soon as it is accepted, so one client
	// cannot take the Max that every client shares.
	PerClient int
	// FirstRequest (0: none) bounds how long a connection may live before
	// one of its requests authenticates (MarkTrusted): every read
	// deadline net/http sets before then is cut to accept + FirstRequest,
	// so an idle, slow or unauthenticated connection is closed by then
	// however it spends the time (no first request, a slow one, or
	// keep-alive requests without a token).
	FirstRequest time.Duration
}

// LimitListener accepts at most n connections at once from l.
func LimitListener(l net.Listener, n int) net.Listener {
	return NewListener(l, ListenerOptions{Max: n})
}

// NewListener bounds l's connections by o. The http.Server serving it must
// use ConnContext, so that authenticated requests can mark their
// connection trusted.
func NewListener(l net.Listener, o ListenerOptions) net.Listener {
	return &limitListener{Listener: l, o: o, sem: make(chan struct{}, o.Max), done: make(chan struct{}), open: map[string]int{}}
}

type limitListener struct {
	net.Listener
	o         ListenerOptions
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	mu   sync.Mutex
	open map[string]int // by client IP, when o.PerClient > 0
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		if !l.admit(ip) {
			// Over its client's cap: closed before net/http sees it.
			_ = c.Close()
			<-l.sem
			continue
		}
		lc := &limitConn{Conn: c, release: func() { l.leave(ip); <-l.sem }}
		if d := l.o.FirstRequest; d > 0 {
			lc.firstBy = time.Now().Add(d)
			lc.mu.Lock()
			_ = c.SetReadDeadline(lc.firstBy)
			lc.mu.Unlock()
		}
		return lc, nil
	}
}

// admit counts a connection of ip, or reports it over the cap.
func (l *limitListener) admit(ip string) bool {
	if l.o.PerClient <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.o.PerClient {
		return false
	}
	l.open[ip]++
	return true
}

func (l *limitListener) leave(ip string) {
	if l.o.PerClient <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// clientIP is the IP of a remote address (the address itself if it has no
// port).
func clientIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()

	mu      sync.Mutex
	firstBy time.Time // zero: trusted (or no first-request deadline)
	asked   time.Time // the read deadline last asked for
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// SetReadDeadline sets t, cut to the first-request deadline while the
// connection is not trusted.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = t
	if !c.firstBy.IsZero() && (t.IsZero() || t.After(c.firstBy)) {
		t = c.firstBy
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *limitConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// trust lifts the first-request deadline: the read deadline net/http last
// asked for applies from here on.
func (c *limitConn) trust() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstBy.IsZero() {
		return
	}
	c.firstBy = time.Time{}
	_ = c.Conn.SetReadDeadline(c.asked)
}

// CloseWrite half-closes a TCP connection (see unauthorized).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type connKey struct{}

// ConnContext is the http.Server's ConnContext for a NewListener: it
// keeps the connection in its requests' contexts for MarkTrusted.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = nc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// MarkTrusted lifts the first-request deadline of the connection that
// carried ctx's request: called once a request authenticates.
func MarkTrusted(ctx context.Context) {
	if lc, ok := ctx.Value(connKey{}).(*limitConn); ok {
		lc.trust()
	}
}
