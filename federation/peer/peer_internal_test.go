package peer

import "testing"

// The cluster token never goes to a plain-http peer off the loopback
// interface unless the operator allowed it.
func TestInsecurePeer(t *testing.T) {
	for _, c := range []struct {
		base         string
		token, allow bool
		want         bool
	}{
		{"https://eu.example.com", true, false, false},
		{"http://eu.example.com:8080", true, false, true},
		{"http://10.0.0.5:8080", true, false, true},
		{"http://eu.example.com:8080", true, true, false},
		{"http://eu.example.com:8080", false, false, false}, // no token to leak (auth off)
		{"http://127.0.0.1:8080", true, false, false},
		{"http://[::1]:8080", true, false, false},
		{"http://localhost:8080", true, false, false},
	} {
		n := New(Config{AllowInsecure: c.allow})
		if c.token {
			n.cfg.Token = "cluster-token-0123456789"
		}
		if got := n.insecure(c.base); got != c.want {
			t.Errorf("insecure(%s, token %v, allow %v) = %v, want %v", c.base, c.token, c.allow, got, c.want)
		}
	}
}
