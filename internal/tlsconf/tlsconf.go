package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Files are what a client side needs: CA verifies the server (the system
// roots when empty), Cert and Key (both or neither) are the client's own
// certificate, ServerName overrides the name checked in the server's
// certificate (the dialled host by default).
type Files struct {
	CA, Cert, Key      string
	ServerName         string
	InsecureSkipVerify bool
}

// Client returns the client side tls.Config of f (TLS 1.2 at least).
func Client(f Files) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify} //nolint:gosec // refused by config unless the operator opts in
	if f.CA != "" {
		pool, err := certPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tls: set cert and key together, or neither")
	}
	if f.Cert != "" {
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

func certPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// Server is the API server's TLS: its certificate and, when a client CA is
// given, the pool client certificates must chain to. Reload re-reads both;
// connections made after it use the new files, open ones keep theirs.
type Server struct {
	cert, key, clientCA string
	state               atomic.Pointer[serverState]
}

type serverState struct {
	cert    *tls.Certificate
	clients *x509.CertPool
}

// NewServer loads cert, key and (when not empty) clientCA.
func NewServer(cert, key, clientCA string) (*Server, error) {
	s := &Server{cert: cert, key: key, clientCA: clientCA}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-reads the files; on error the files loaded before stay in use.
func (s *Server) Reload() error {
	c, err := tls.LoadX509KeyPair(s.cert, s.key)
	if err != nil {
		return fmt.Errorf("tls: server certificate: %w", err)
	}
	st := &serverState{cert: &c}
	if s.clientCA != "" {
		if st.clients, err = certPool(s.clientCA); err != nil {
			return err
		}
	}
	s.state.Store(st)
	return nil
}

// Config is the listener's tls.Config: each handshake takes the files
// loaded last.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := s.state.Load()
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*st.cert}}
			if st.clients != nil {
				cfg.ClientCAs, cfg.ClientAuth = st.clients, tls.RequireAndVerifyClientCert
			}
			return cfg, nil
		},
	}
}

// Peer is the client side of calls to other regions' servers: ca verifies
// them (the system roots when empty) and the server's own certificate is
// offered when a peer asks for one (mutual TLS between regions); after a
// Reload the new one.
func (s *Server) Peer(ca string) (*tls.Config, error) {
	cfg, err := Client(Files{CA: ca})
	if err != nil {
		return nil, err
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return s.state.Load().cert, nil
	}
	return cfg, nil
}
