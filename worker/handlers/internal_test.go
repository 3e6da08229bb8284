package handlers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAllowedMatchesAtABoundary(t *testing.T) {
	prefixes := []string{"https://api.example.com", "http://10.0.0.1:8080/hooks/"}
	for _, c := range []struct {
		url  string
		want bool
	}{
		{"https://api.example.com", true},
		{"https://api.example.com/v1/x", true},
		{"https://api.example.com?x=1", true},
		{"https://api.example.com.evil.net/", false},
		{"https://api.example.com@evil.net/", false},
		{"https://api.example.comx/", false},
		{"http://10.0.0.1:8080/hooks/a", true},
		{"http://10.0.0.1:8080/hooks", false},
		{"http://10.0.0.1:80800/hooks/a", false},
		{"file:///etc/passwd", false},
	} {
		if got := allowed(prefixes, c.url); got != c.want {
			t.Errorf("allowed(%q) = %v, want %v", c.url, got, c.want)
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
