package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// flooder is the address the hostile client's connections come from; the
// harness's own calls come from 127.0.0.1, so the servers tell them apart.
var flooder = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// dialFrom opens a TCP connection to api's host from local.
func dialFrom(t *testing.T, local *net.TCPAddr, api string) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	return d.Dial("tcp", strings.TrimPrefix(api, "http://"))
}

// getOn sends one keep-alive GET on c and reads its answer (deadline 3 s).
func getOn(c net.Conn, br *bufio.Reader, path, token string) (*http.Response, error) {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ax\r\n%s\r\n", path, auth); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// closedWithin reports how long c took to be closed by the server (a read
// ending in EOF or a reset), or fails the test if it is still open after max.
func closedWithin(t *testing.T, c net.Conn, br *bufio.Reader, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(max))
	_, err := br.ReadByte()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("the connection is still open after %s (%v)", max, err)
	}
	return time.Since(start)
}

// Real `ax server`s (two regions, auth on, metrics and /readyz details
// private): one client IP's idle keep-alive flood, slow or silent new
// connections and a burst of wrong tokens leave another client's submits
// answered; a worker's /metrics needs a token of every tenant.
func TestConnectionAndAuthFloodsLeaveOtherClientsServed(t *testing.T) {
	fed := newFederation(t, fedOpts{privateDetails: true,
		httpServer: "max_connections: 64\nmax_connections_per_client: 16\nfirst_request_timeout: 2s"})
	api := fed.server("us-east-1").api
	spec := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "regions": []string{"us-east-1"}}

	t.Run("idle keep-alive flood from one client", func(t *testing.T) {
		fed := fed.on(t)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		answered, refused := 0, 0
		// 200 connections at once, each a token-less GET /healthz kept
		// alive, re-opened as soon as it is closed: the flood holds all it
		// can for the whole test.
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					c, err := dialFrom(t, flooder, api)
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					br := bufio.NewReader(c)
					_, err = getOn(c, br, "/healthz", "")
					mu.Lock()
					if err == nil {
						answered++
					} else {
						refused++
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(20 * time.Millisecond)
					}
					if err == nil {
						// Idle until the server closes it (or the test ends).
						go func() { <-ctx.Done(); c.Close() }()
						_ = c.SetReadDeadline(time.Time{})
						_, _ = br.ReadByte()
					}
					c.Close()
				}
			}()
		}
		time.Sleep(time.Second) // the flood in place
		var lat []time.Duration
		for i := 0; i < 50; i++ {
			start := time.Now()
			fed.submit("us-east-1", tokSubmitterB, spec)
			lat = append(lat, time.Since(start))
		}
		stop()
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("another client's submits under the flood: p50 %s, p99 %s, max %s; flood: %d answered, %d refused",
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], answered, refused)
		if refused == 0 {
			t.Fatalf("none of the flood's connections beyond its cap were refused (%d answered)", answered)
		}
	})

	t.Run("one client's connections beyond its cap are closed at once", func(t *testing.T) {
		fed := fed.on(t)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		// 16 connections the server answered (authenticated, so that the
		// first-request deadline leaves them open); the flood's last ones
		// may still be counted for a moment, so some may take a retry.
		tok := fed.token(tokSubmitterB)
		deadline := time.Now().Add(15 * time.Second)
		for len(conns) < 16 && time.Now().Before(deadline) {
			c, err := dialFrom(t, flooder, api)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := getOn(c, bufio.NewReader(c), "/v1/tasks?limit=1", tok); err == nil && resp.StatusCode == http.StatusOK {
				conns = append(conns, c)
				continue
			}
			c.Close()
			time.Sleep(100 * time.Millisecond)
		}
		if len(conns) < 16 {
			t.Fatalf("only %d connections of one client answered, want 16", len(conns))
		}
		c, err := dialFrom(t, flooder, api)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if d := closedWithin(t, c, bufio.NewReader(c), time.Second); d > time.Second {
			t.Fatalf("the 17th connection closed after %s", d)
		}
		// Another client is not counted with them.
		if code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/tasks?limit=1", nil); code != http.StatusOK {
			t.Fatalf("another client: %d %s", code, body)
		}
	})

	t.Run("a new connection lives until its first authenticated request only", func(t *testing.T) {
		fed := fed.on(t)
		silent, err := dialFrom(t, nil, api)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		if d := closedWithin(t, silent, bufio.NewReader(silent), 8*time.Second); d < time.Second {
			t.Fatalf("a silent connection closed after %s, before first_request_timeout (2s)", d)
		}
		// Token-less keep-alive requests do not extend it.
		anon, err := dialFrom(t, nil, api)
		if err != nil {
			t.Fatal(err)
		}
		defer anon.Close()
		br := bufio.NewReader(anon)
		if resp, err := getOn(anon, br, "/healthz", ""); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		closedWithin(t, anon, br, 8*time.Second)
		// An authenticated connection stays open past it, for its idle timeout.
		authed, err := dialFrom(t, nil, api)
		if err != nil {
			t.Fatal(err)
		}
		defer authed.Close()
		br = bufio.NewReader(authed)
		if resp, err := getOn(authed, br, "/v1/tasks?limit=1", fed.token(tokSubmitterB)); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("authenticated request: %v %v", resp, err)
		}
		time.Sleep(3 * time.Second)
		if resp, err := getOn(authed, br, "/v1/tasks?limit=1", fed.token(tokSubmitterB)); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the authenticated connection after 3 s idle: %v %v", resp, err)
		}
	})

	t.Run("wrong tokens are throttled per client", func(t *testing.T) {
		fed := fed.on(t)
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: flooder}).DialContext}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		get := func(token string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, api+"/v1/tasks?limit=1", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}
		var first429 int
		for i := 1; i <= 500 && first429 == 0; i++ {
			switch resp := get("wrong-" + randomHex(8)); resp.StatusCode {
			case http.StatusUnauthorized:
			case http.StatusTooManyRequests:
				if resp.Header.Get("Retry-After") == "" {
					t.Fatalf("429 without Retry-After: %v", resp.Header)
				}
				first429 = i
			default:
				t.Fatalf("wrong token: %d", resp.StatusCode)
			}
		}
		if first429 == 0 {
			t.Fatal("500 wrong tokens from one client, none answered 429")
		}
		t.Logf("wrong tokens answered 429 from the %dth on", first429)
		// The throttled client waits, whatever its token...
		if resp := get(fed.token(tokSubmitterA)); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a right token from the throttled client: %d", resp.StatusCode)
		}
		// ...another client does not.
		if code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/tasks?limit=1", nil); code != http.StatusOK {
			t.Fatalf("a right token from another client: %d %s", code, body)
		}
		logs := fed.server("us-east-1").log.String()
		if n := strings.Count(logs, `msg="failed authentications"`); n < 1 || n > 3 {
			t.Fatalf("%d log lines of failed authentications, want 1 to 3 (one every 10 s at most)", n)
		}
	})

	t.Run("a worker's metrics need a token of every tenant", func(t *testing.T) {
		fed := fed.on(t)
		p := fed.startWorker("us-east-1", "cpu", "--metrics", "127.0.0.1:0")
		var url string
		waitUntil(t, 20*time.Second, p.name+" to serve metrics", func() bool {
			if m := metricsListen.FindStringSubmatch(p.log.String()); m != nil {
				url = "http://" + m[1] + "/metrics"
				return true
			}
			return false
		})
		for _, c := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {tokSubmitterA, http.StatusForbidden}, {tokOperatorA, http.StatusForbidden}, {tokAdmin, http.StatusOK}} {
			code, body := fed.callAPI(strings.TrimSuffix(url, "/metrics"), c.token, http.MethodGet, "/metrics", nil)
			if code != c.want {
				t.Errorf("worker /metrics with %q: %d, want %d: %.200s", c.token, code, c.want, body)
			}
			if code == http.StatusOK && !strings.Contains(string(body), "ax_") {
				t.Errorf("worker /metrics with %q: no ax_ series", c.token)
			}
		}
	})
}
