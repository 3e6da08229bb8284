package tlsconf

import (
	"crypto/x509"
	"os"
	"testing"
)

func serial(t *testing.T, s *Server) int64 {
	t.Helper()
	cfg, err := s.Config().GetConfigForClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Int64()
}

// Reload puts renewed files in service; files that do not load leave the
// last good ones.
func TestServerReload(t *testing.T) {
	ca, err := NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue("server", 2)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cert, key, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(t, s); got != 2 {
		t.Fatalf("serial %d, want 2", got)
	}
	if _, _, err := ca.Issue("server", 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(t, s); got != 7 {
		t.Fatalf("after Reload: serial %d, want 7", got)
	}
	if err := os.WriteFile(cert, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("Reload of a broken file: no error")
	}
	if got := serial(t, s); got != 7 {
		t.Fatalf("after a failed Reload: serial %d, want 7", got)
	}
	if _, err := Client(Files{CA: cert + ".missing"}); err == nil {
		t.Fatal("Client with a missing CA: no error")
	}
}
