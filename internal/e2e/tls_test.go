package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/task"
)

// TLS on every hop, with auth on and two regions: clients reach the API over https
// with a client certificate (mutual TLS), a task is handed to the other
// region over https (servers present their certificates to each other) and
// read back through its home region's server (forwarded over https),
// servers and workers reach Redis only on its TLS port with a client
// certificate (rediss://), the CLI takes --ca/--cert/--key, and SIGHUP
// puts a renewed certificate in service without a restart.
func TestTLSOnEveryHop(t *testing.T) {
	t.Parallel()
	fed := newFederation(t, fedOpts{tls: true})
	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{"type": "noop"})
	// Read through its home region: forwarded to eu-west-1 over https.
	fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second)
	api := fed.server("us-east-1").api
	if !strings.HasPrefix(api, "https://") {
		t.Fatalf("the API address is %s, want https", api)
	}

	// Plain http to the TLS port: refused by the TLS server.
	resp, err := http.Get("http://" + strings.TrimPrefix(api, "https://") + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain http to the API: %d, want 400", resp.StatusCode)
		}
	}
	// https without a client certificate: the handshake fails.
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(fed.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := noCert.Get(api + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("https without a client certificate: %d, want a failed handshake", resp.StatusCode)
	}

	// The CLI over https.
	c := fed.certs
	out, stderr, code := runAx(t, api, "--ca", c.CA, "--cert", c.Client, "--key", c.ClientKey,
		"--token", fed.token(tokSubmitterA), "get", h.ID, "-o", "json")
	if code != 0 || !strings.Contains(out, h.ID) {
		t.Fatalf("ax get over https: exit %d: %s %s", code, out, stderr)
	}
	_, stderr, code = runAx(t, api, "--token", fed.token(tokSubmitterA), "get", h.ID)
	if code == 0 || !strings.Contains(stderr, "certificate") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("ax get without --ca: exit %d, stderr %q: want non-zero, one line naming the certificate", code, stderr)
	}

	// Redis' TLS port takes no plain client: what ax used was TLS.
	r := fed.region("eu-west-1")
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(r.tlsPort), Password: r.password, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(context.Background()).Err(); err == nil {
		t.Fatal("a plain client talks to Redis' TLS port")
	}

	// A renewed certificate is served after SIGHUP, without a restart.
	before := servedSerial(t, fed, api)
	c.Issue("server", 42)
	fed.server("us-east-1").signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the renewed certificate in service", func() bool {
		return servedSerial(t, fed, api) == 42
	})
	if before == 42 {
		t.Fatal("the first certificate already had serial 42")
	}
	// Hand-off still works with the renewed certificate on the sender.
	h2 := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterB, map[string]any{"type": "noop"})
	fed.waitState("us-east-1", tokSubmitterB, h2.ID, task.Success, 20*time.Second)
}

// servedSerial is the serial number of the certificate api serves to a new
// connection.
func servedSerial(t *testing.T, fed *federation, api string) int64 {
	t.Helper()
	tr := fed.http.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(api + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}
