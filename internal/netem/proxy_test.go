package netem_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/netem"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a line echo server; t.Cleanup stops it.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

func start(t *testing.T, target string, l netem.Link) *netem.Proxy {
	t.Helper()
	p, err := netem.Start(target, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// roundTrip sends one line on c and waits for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, within time.Duration) (time.Duration, error) {
	at := time.Now()
	_ = c.SetDeadline(at.Add(within))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echo: " + line)
	}
	return time.Since(at), err
}

func TestDelayEachWay(t *testing.T) {
	p := start(t, echo(t), netem.Link{Delay: 40 * time.Millisecond})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for range 3 {
		rtt, err := roundTrip(c, r, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if rtt < 80*time.Millisecond || rtt > 200*time.Millisecond {
			t.Fatalf("round trip %v through a 40 ms link, want 80 ms and a little", rtt)
		}
	}
}

// A partition drops new connections' SYNs (the dial times out, nothing is
// refused) and holds open connections' bytes until the heal; Cut resets
// the open ones.
func TestPartitionDropsSYNsAndHoldsBytes(t *testing.T) {
	p := start(t, echo(t), netem.Link{})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, time.Second); err != nil {
		t.Fatal(err)
	}

	p.Partition()
	if d, err := net.DialTimeout("tcp", p.Addr(), 500*time.Millisecond); err == nil {
		_ = d.Close()
		t.Fatal("a dial through a partition connected")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a dial through a partition: %v, want a timeout (SYN dropped), not a refusal", err)
	}
	if _, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
		t.Fatal("bytes crossed a partition")
	}
	p.Heal()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("held bytes after the heal: %q, %v", line, err)
	}
	d, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial after the heal: %v", err)
	}
	defer d.Close()
	if _, err := roundTrip(d, bufio.NewReader(d), time.Second); err != nil {
		t.Fatalf("new connection after the heal: %v", err)
	}

	p.Cut()
	if _, err := roundTrip(d, bufio.NewReader(d), time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("after Cut: %v, want a reset", err)
	}
}

// Lost segments arrive a retransmission timeout late; reset connections
// end with an RST.
func TestLossStallsAndResets(t *testing.T) {
	p := start(t, echo(t), netem.Link{Loss: 0.3, RTO: 20 * time.Millisecond})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var slow int
	for range 20 {
		rtt, err := roundTrip(c, r, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if rtt >= 20*time.Millisecond {
			slow++
		}
	}
	_ = c.Close()
	segs, lost := p.Stats()
	if lost == 0 || slow == 0 || lost > segs {
		t.Fatalf("%d of %d segments lost, %d of 20 round trips stalled; want some of each at 30 %% loss", lost, segs, slow)
	}

	p.SetLink(netem.Link{Reset: 1})
	d, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rd := bufio.NewReader(d)
	for i := range 20 {
		if _, err := roundTrip(d, rd, time.Second); err != nil {
			if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
				t.Fatalf("round trip %d: %v, want a reset", i, err)
			}
			return
		}
	}
	t.Fatal("a connection of a link resetting every connection lived through 20 round trips")
}
