package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi"
)

// serveLimited serves an API with auth on (no federation behind it: only
// what happens before a handler runs is exercised) on a LimitListener of n.
func serveLimited(t *testing.T, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(nil, httpapi.Config{Auth: &httpapi.Auth{Enabled: true, ClusterToken: "cluster-secret"}})
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = srv.Serve(httpapi.LimitListener(ln, n)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// An unauthenticated request with a slow body gets its 401 at once, with
// the body still unsent, and the connection is closed.
func TestUnauthenticatedSlowBodyGets401AtOnce(t *testing.T) {
	addr := serveLimited(t, 16)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Headers and 10 of 1 000 000 promised body bytes; the rest never comes.
	fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"type\":\"x")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body is unsent: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), apiv1.CodeUnauthorized) ||
		!strings.Contains(string(body), `"field":"Authorization"`) || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	// The server closes the connection: a read ends (EOF or reset), it
	// does not hang until the deadline.
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stays open after the 401")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stays open after the 401 (read timed out)")
	}
}

// The connection cap: with max 2 open, a third connection is not served
// until one of the first two closes.
func TestConnectionCap(t *testing.T) {
	addr := serveLimited(t, 2)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection within the cap: %v %v", resp, err)
		}
		held = append(held, c) // kept alive, idle
	}
	third, err := net.Dial("tcp", addr) // the kernel accepts it into the backlog
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprintf(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(third)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("a third connection was served past a cap of 2")
	}
	held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the third connection once one closed: %v %v", resp, err)
	}
}
