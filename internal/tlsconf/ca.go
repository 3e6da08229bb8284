package tlsconf

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
	"time"
)

// CA is a throw-away certificate authority for tests and benches: its
// certificates are for 127.0.0.1, ::1 and localhost, valid a day, for both
// server and client use (ax servers offer theirs to each other).
type CA struct {
	Dir  string
	File string // the CA's certificate (PEM)
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA in dir (ca.pem).
func NewCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ax test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	c := &CA{Dir: dir, key: key}
	if c.cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	c.File, err = writePEM(dir, "ca.pem", "CERTIFICATE", der)
	return c, err
}

// Issue writes a certificate of name (serial as given) and its key, signed
// by the CA, as name.pem and name-key.pem, and returns their paths. Issuing
// a name again overwrites its files (a renewed certificate).
func (c *CA) Issue(name string, serial int64) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &k.PublicKey, c.key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	// Key first: a reader between the two writes sees a pair that does
	// not match and keeps what it had.
	if key, err = writePEM(c.Dir, name+"-key.pem", "EC PRIVATE KEY", kb); err != nil {
		return "", "", err
	}
	cert, err = writePEM(c.Dir, name+".pem", "CERTIFICATE", der)
	return cert, key, err
}

func writePEM(dir, name, typ string, der []byte) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
