package handlers

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The prefix is checked on the URL as a server reads it, and that form is
// sent: "<prefix>../admin", "%2e%2e" and "..%2f" never reach paths outside
// it.
func TestTargetChecksTheCleanURL(t *testing.T) {
	var prefixes []prefix
	for _, s := range []string{"https://api.example.com", "http://10.0.0.1:8080/hooks/", "https://h.example.com/v1/send"} {
		p, err := parsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, p)
	}
	for _, c := range []struct {
		url  string
		want string // the URL sent, "" when refused
	}{
		{"https://api.example.com", "https://api.example.com/"},
		{"https://api.example.com/v1/x", "https://api.example.com/v1/x"},
		{"https://api.example.com?x=1", "https://api.example.com/?x=1"},
		{"HTTPS://API.Example.COM:443/a#frag", "https://api.example.com/a"},
		{"https://api.example.com.evil.net/", ""},
		{"https://api.example.com@evil.net/", ""},
		{"https://user:pw@api.example.com/", ""},
		{"https://api.example.comx/", ""},
		{"https://api.example.com:8443/", ""},
		{"http://api.example.com/", ""},
		{"http://10.0.0.1:8080/hooks/a", "http://10.0.0.1:8080/hooks/a"},
		{"http://10.0.0.1:8080/hooks/a/./b/../c/", "http://10.0.0.1:8080/hooks/a/c/"},
		{"http://10.0.0.1:8080/hooks", ""},
		{"http://10.0.0.1:8080/hooks/../admin", ""},
		{"http://10.0.0.1:8080/hooks/%2e%2e/admin", ""},
		{"http://10.0.0.1:8080/hooks/%2E%2E/admin", ""},
		{"http://10.0.0.1:8080/hooks/..%2fadmin", ""},
		{"http://10.0.0.1:8080/hooks/%2e%2e%2fadmin", ""},
		{"http://10.0.0.1:8080/hooks/a/../../admin", ""},
		{"http://10.0.0.1:8080/hooks/..\\admin", ""},
		{"http://10.0.0.1:8080/hooks/%5c..%5cadmin", ""},
		{"http://10.0.0.1:8080/hooks/%252e%252e/admin", ""},
		{"http://10.0.0.1:8080/hooks/..;/admin", ""},
		{"http://10.0.0.1:8080/hooks/a%00b", ""},
		{"http://10.0.0.1:8080/hooks/a%0d%0aX:1", ""},
		{"http://10.0.0.1:8080/hooks/a%2fb", "http://10.0.0.1:8080/hooks/a/b"},
		{"http://10.0.0.1:8080/hooks/..a", "http://10.0.0.1:8080/hooks/..a"},
		{"http://10.0.0.1:80800/hooks/a", ""},
		{"http://10.0.0.1:/hooks/a", ""},
		{"https://h.example.com/v1/send", "https://h.example.com/v1/send"},
		{"https://h.example.com/v1/send/x", "https://h.example.com/v1/send/x"},
		{"https://h.example.com/v1/sendmore", ""},
		{"https://h.example.com/v1/send/../../admin", ""},
		{"file:///etc/passwd", ""},
		{"http:opaque", ""},
	} {
		u, err := url.Parse(c.url)
		var got *url.URL
		if err == nil {
			got, err = target(prefixes, u)
		}
		switch {
		case c.want == "" && err == nil:
			t.Errorf("target(%q) = %s, want refused", c.url, got)
		case c.want != "" && err != nil:
			t.Errorf("target(%q): %v, want %s", c.url, err, c.want)
		case c.want != "" && got.String() != c.want:
			t.Errorf("target(%q) = %s, want %s", c.url, got, c.want)
		}
	}
}

func TestPrefixesMustBePlain(t *testing.T) {
	for _, s := range []string{
		"https://h.example.com/a/../b/", "https://h.example.com/%2e%2e/", "https://h.example.com/a%2fb/",
		"https://h.example.com/?q=1", "https://u@h.example.com/", "ftp://h.example.com/", "/relative",
	} {
		if _, err := parsePrefix(s); err == nil {
			t.Errorf("prefix %q accepted", s)
		}
	}
}

func TestInternalAddresses(t *testing.T) {
	for ip, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "172.16.0.1": "private",
		"192.168.1.1": "private", "fd00::1": "private", "169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified", "100.100.100.200": "shared (carrier-grade NAT)",
		"224.0.0.1": "multicast", "255.255.255.255": "broadcast", "::ffff:127.0.0.1": "loopback",
		"64:ff9b::a9fe:a9fe": "link-local", "2002:c0a8:0101::1": "private", "198.18.0.1": "benchmarking",
		"0.1.2.3": "this-network", "fec0::1": "site-local",
		"8.8.8.8": "", "1.1.1.1": "", "2606:4700:4700::1111": "", "2002:0808:0808::1": "",
	} {
		if got := internalKind(netip.MustParseAddr(ip)); got != want {
			t.Errorf("internalKind(%s) = %q, want %q", ip, got, want)
		}
	}
}

func TestTailKeepsTheEndOnARuneBoundary(t *testing.T) {
	tl := newTail(8)
	for _, s := range []string{"abc", "déf", strings.Repeat("x", 20), "üü", "end"} {
		_, _ = tl.Write([]byte(s))
	}
	if got := tl.String(); got != "xüüend" {
		t.Fatalf("tail %q", got)
	}
	if got := tl.last(6); got != "üend" || !utf8.ValidString(got) {
		t.Fatalf("last(6) = %q", got)
	}
}

func TestRetryAfterAnswer(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		code   int
		header string
		body   string
		want   time.Duration
		ok     bool
	}{
		{200, "", `{"retry_after_seconds": 2}`, 2 * time.Second, true},
		{200, "", `{"retry_after_seconds": 0}`, 0, false},
		{200, "5", `ok`, 0, false}, // a success's header asks nothing
		{429, "3", ``, 3 * time.Second, true},
		{503, now.Add(4 * time.Second).Format(http.TimeFormat), ``, 4 * time.Second, true},
		{429, "soon", ``, 0, false},
		{429, "", `{"retry_after_seconds": 1.5}`, 1500 * time.Millisecond, true},
	} {
		resp := &http.Response{StatusCode: c.code, Header: http.Header{}}
		if c.header != "" {
			resp.Header.Set("Retry-After", c.header)
		}
		got, ok := retryAfter(resp, c.body, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%d %q %q: %v %v, want %v %v", c.code, c.header, c.body, got, ok, c.want, c.ok)
		}
	}
}
