package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Certs are PEM files of a test CA and certificates it signed, for
// 127.0.0.1, ::1 and localhost, valid for both server and client use (ax
// servers offer theirs to each other in mutual TLS).
type Certs struct {
	Dir       string
	CA        string // the CA's certificate
	Cert      string // a server (and client) certificate
	Key       string
	Client    string // a client certificate of another name
	ClientKey string

	t      testing.TB
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewCerts makes a CA and two certificates it signed in a temp dir.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	c := &Certs{t: t, Dir: t.TempDir()}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ax test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if c.caCert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	c.caKey = key
	c.CA = c.write("ca.pem", "CERTIFICATE", der)
	c.Cert, c.Key = c.Issue("server", 2)
	c.Client, c.ClientKey = c.Issue("client", 3)
	return c
}

// Issue writes a certificate of name (serial as given) and its key, signed
// by the CA, as name.pem and name-key.pem; it returns their paths. Issuing
// a name again overwrites its files (a renewed certificate).
func (c *Certs) Issue(name string, serial int64) (cert, key string) {
	c.t.Helper()
	k := newKey(c.t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.caCert, &k.PublicKey, c.caKey)
	if err != nil {
		c.t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		c.t.Fatal(err)
	}
	// Key first: a reader between the two writes sees a pair that does
	// not match and keeps what it had.
	key = c.write(name+"-key.pem", "EC PRIVATE KEY", kb)
	cert = c.write(name+".pem", "CERTIFICATE", der)
	return cert, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (c *Certs) write(name, typ string, der []byte) string {
	p := filepath.Join(c.Dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// RedisTLS are the directives of a Redis that also listens with TLS on
// port (clients must present a certificate of the CA); its plain port
// stays for the test's own clients.
func (c *Certs) RedisTLS(port int) []string {
	return []string{"tls-port " + strconv.Itoa(port), "tls-cert-file " + c.Cert, "tls-key-file " + c.Key,
		"tls-ca-cert-file " + c.CA, "tls-auth-clients yes"}
}
