package handlers

import (
	"net/url"
	"path"
	"strings"
	"testing"
)

// FuzzHTTPTarget checks the one URL check of the http handler: whatever
// the task's URL, an accepted target lies under the prefix once a server
// parses it again, has no dot segment left, and cleaning it again changes
// nothing (what was checked is what is sent).
func FuzzHTTPTarget(f *testing.F) {
	for _, seed := range []string{
		"http://h.example.com/hooks/a", "http://h.example.com/hooks/../admin", "http://h.example.com/hooks/%2e%2e/admin",
		"http://h.example.com/hooks/..%2fadmin", "http://h.example.com/hooks/%252e%252e/x", "http://h.example.com/hooks/..;/x",
		"http://u:p@h.example.com/hooks/a", "HTTP://H.EXAMPLE.COM:80/hooks/a?x=1#f", "http://h.example.com/hooks/a\\..\\b",
		"http://h.example.com/hooks/a%2fb/./c/", "http://[::1]/hooks/", "http://h.example.com:/hooks/",
	} {
		f.Add(seed)
	}
	p, err := parsePrefix("http://h.example.com/hooks/")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		got, err := target([]prefix{p}, u)
		if err != nil {
			return
		}
		sent := got.String()
		again, err := url.Parse(sent)
		if err != nil {
			t.Fatalf("%q → %q, which does not parse: %v", raw, sent, err)
		}
		if again.Host != "h.example.com" || again.User != nil || !strings.HasPrefix(again.Path, "/hooks/") {
			t.Fatalf("%q → %q leaves the prefix (host %q, path %q)", raw, sent, again.Host, again.Path)
		}
		for _, seg := range strings.Split(again.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q → %q keeps a dot segment", raw, sent)
			}
		}
		if c, err := clean(again); err != nil || c.String() != sent {
			t.Fatalf("%q → %q cleans again to %v (%v)", raw, sent, c, err)
		}
		if cl := path.Clean(again.Path); cl != strings.TrimSuffix(again.Path, "/") && cl != again.Path {
			t.Fatalf("%q → %q: path not clean", raw, sent)
		}
	})
}
