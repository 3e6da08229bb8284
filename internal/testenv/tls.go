package testenv

import (
	"strconv"
	"testing"

	"github.com/ax-sched/ax/internal/tlsconf"
)

// Certs are PEM files of a test CA (tlsconf.CA) and two certificates it
// signed, for 127.0.0.1, ::1 and localhost, for server and client use.
type Certs struct {
	Dir       string
	CA        string // the CA's certificate
	Cert      string // a server (and client) certificate, serial 2
	Key       string
	Client    string // a client certificate of another name, serial 3
	ClientKey string

	t  testing.TB
	ca *tlsconf.CA
}

// NewCerts makes a CA and two certificates it signed in a temp dir.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	ca, err := tlsconf.NewCA(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: CA: %v", err)
	}
	c := &Certs{t: t, Dir: ca.Dir, CA: ca.File, ca: ca}
	c.Cert, c.Key = c.Issue("server", 2)
	c.Client, c.ClientKey = c.Issue("client", 3)
	return c
}

// Issue writes a certificate of name and its key (tlsconf.CA.Issue).
func (c *Certs) Issue(name string, serial int64) (cert, key string) {
	c.t.Helper()
	cert, key, err := c.ca.Issue(name, serial)
	if err != nil {
		c.t.Fatalf("testenv: certificate %s: %v", name, err)
	}
	return cert, key
}

// RedisTLS are the directives of a Redis that also listens with TLS on
// port (clients must present a certificate of the CA); its plain port
// stays for the test's own clients.
func (c *Certs) RedisTLS(port int) []string {
	return []string{"tls-port " + strconv.Itoa(port), "tls-cert-file " + c.Cert, "tls-key-file " + c.Key,
		"tls-ca-cert-file " + c.CA, "tls-auth-clients yes"}
}
