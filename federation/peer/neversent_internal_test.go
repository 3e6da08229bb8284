package peer

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/netem"
)

// A request whose connection was never opened (the dial still pending when
// the deadline came: SYNs dropped) was never sent; one that reached a
// server that never answered may have been received.
func TestNeverSentDistinguishesDialFromAnswer(t *testing.T) {
	c := New(Config{})
	tr := c.http.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // a black hole: the connect never completes
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Call(ctx, "http://192.0.2.1:9", http.MethodPost, "/v1/internal/handoff", map[string]int{"a": 1}, nil)
	if err == nil || !NeverSent(err) {
		t.Fatalf("dial that never completed: err %v, NeverSent %v; want never sent", err, NeverSent(err))
	}

	// A server that accepts the connection and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c2 := New(Config{})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = c2.Call(ctx2, "http://"+ln.Addr().String(), http.MethodPost, "/v1/internal/handoff", map[string]int{"a": 1}, nil)
	if err == nil || NeverSent(err) {
		t.Fatalf("request to a silent server: err %v, NeverSent %v; want maybe sent", err, NeverSent(err))
	}
}

// A peer behind a partition that drops SYNs fails a call unsent within
// DialTimeout, long before the call's own deadline.
func TestDialTimeoutEndsACallToAPartitionedPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	link, err := netem.Start(ln.Addr().String(), netem.Link{})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	link.Partition()
	c := New(Config{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Call(ctx, link.URL(), http.MethodPost, "/v1/internal/handoff/batch", map[string]int{"a": 1}, nil)
	took := time.Since(start)
	if err == nil || !NeverSent(err) || !DialTimedOut(err) {
		t.Fatalf("call through a partition: err %v, NeverSent %v, DialTimedOut %v; want a dial timeout, never sent", err, NeverSent(err), DialTimedOut(err))
	}
	if took < DialTimeout || took > DialTimeout+time.Second {
		t.Fatalf("call through a partition failed after %v, want about DialTimeout (%v)", took, DialTimeout)
	}
}
