package handlers

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"syscall"
)

// prefix is one allowed URL prefix in its clean form.
type prefix struct {
	scheme, host, path string // host with a non-default port; path ends in "/" or matches at a segment boundary
}

// clean is the one reading of a URL that both the payload's url and every
// redirect go through before the prefix check: it refuses what is not a
// plain absolute http(s) URL (userinfo, an opaque part, no host, a bad
// port), decodes the path's percent-encoding (%2e%2e is ".." and ..%2f is
// "../"), refuses a path that servers read in more than one way
// (backslashes, control characters, a '%' left after decoding, dot
// segments carrying ";" parameters), and resolves its dot segments. The
// URL returned is the one to send: what was checked is what the server
// gets. Its fragment is dropped; the query is kept as it is.
func clean(u *url.URL) (*url.URL, error) {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("not an http or https URL")
	case u.Opaque != "":
		return nil, errors.New("not an absolute URL with a path")
	case u.User != nil:
		return nil, errors.New("URLs with a user or password are refused")
	case u.Hostname() == "":
		return nil, errors.New("no host")
	}
	host := strings.ToLower(u.Hostname())
	if strings.ContainsAny(host, "%\\") {
		return nil, errors.New("the host holds '%' or '\\'")
	}
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.HasSuffix(u.Host, ":") {
		return nil, errors.New("an empty port")
	}
	p := u.Path
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' || r == '%' {
			return nil, fmt.Errorf("the path holds %q, which servers read in different ways", r)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if name, _, params := strings.Cut(seg, ";"); params && (name == "." || name == "..") {
			return nil, errors.New(`the path has a dot segment with ";" parameters`)
		}
	}
	cleaned := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && cleaned != "/" {
		cleaned += "/"
	}
	out := &url.URL{Scheme: u.Scheme, Host: host, Path: cleaned, RawQuery: u.RawQuery}
	if strings.Contains(host, ":") {
		out.Host = "[" + host + "]"
	}
	if port != "" {
		out.Host += ":" + port
	}
	return out, nil
}

// parsePrefix reads an allowed prefix, which must already be in its clean
// form (a prefix holding ".." or %2e would be read differently by people
// and by the check).
func parsePrefix(s string) (prefix, error) {
	u, err := url.Parse(s)
	if err != nil {
		return prefix{}, fmt.Errorf("allowed prefix %q is not a URL", s)
	}
	c, err := clean(u)
	if err != nil {
		return prefix{}, fmt.Errorf("allowed prefix %q: %v", s, err)
	}
	switch {
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return prefix{}, fmt.Errorf("allowed prefix %q has a query or fragment", s)
	case u.RawPath != "" || (u.Path != "" && c.Path != u.Path):
		return prefix{}, fmt.Errorf("allowed prefix %q is not in its plain form (%s)", s, c.String())
	}
	return prefix{scheme: c.Scheme, host: c.Host, path: c.Path}, nil
}

// matches reports whether the clean URL u lies under p: same scheme and
// host, and a path equal to p's or below it at a segment boundary.
func (p prefix) matches(u *url.URL) bool {
	if u.Scheme != p.scheme || u.Host != p.host {
		return false
	}
	if strings.HasSuffix(p.path, "/") {
		return strings.HasPrefix(u.Path, p.path)
	}
	return u.Path == p.path || strings.HasPrefix(u.Path, p.path+"/")
}

// errNotAllowed is a URL outside the allowlist.
var errNotAllowed = errors.New("not under an allowed prefix")

// target is the check both the payload's URL and redirects go through:
// the clean form of u if it lies under one of the prefixes.
func target(prefixes []prefix, u *url.URL) (*url.URL, error) {
	c, err := clean(u)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotAllowed, err)
	}
	for _, p := range prefixes {
		if p.matches(c) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", errNotAllowed, c.Redacted())
}

// errPrivateTarget is a connection refused by HTTPOptions.DenyPrivate.
var errPrivateTarget = errors.New("refused by deny_private")

// denyPrivate is a net.Dialer Control: it runs for every address a
// connection is about to be made to, after DNS resolution, so a name that
// resolves (or re-resolves, DNS rebinding) to an internal address is
// refused as an address literal would be.
func denyPrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", errPrivateTarget, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address", errPrivateTarget, host)
	}
	if kind := internalKind(ip); kind != "" {
		return fmt.Errorf("%w: %s is a %s address", errPrivateTarget, ip, kind)
	}
	return nil
}

// special are ranges not reachable on the internet that netip has no
// predicate for.
var special = []struct {
	p    netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// internalKind names why ip is not a public unicast address, or "".
// Addresses that carry an IPv4 address inside (IPv4-mapped, NAT64, 6to4)
// are judged by it.
func internalKind(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return internalKind(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return internalKind(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast():
		return "multicast"
	case ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, s := range special {
		if s.p.Contains(ip) {
			return s.kind
		}
	}
	return ""
}

// CheckHTTPPrefix reports whether s may be an allowed prefix of the http
// handler, for config validation; with denyPrivate, a prefix naming an
// internal address literal is refused too (no task could reach it). Host
// names are checked when connected to.
func CheckHTTPPrefix(s string, denyPrivate bool) error {
	p, err := parsePrefix(s)
	if err != nil {
		return err
	}
	if !denyPrivate {
		return nil
	}
	h := p.host
	if hp, _, err := net.SplitHostPort(h); err == nil {
		h = hp
	}
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		if kind := internalKind(ip); kind != "" {
			return fmt.Errorf("allowed prefix %q names a %s address, which deny_private refuses", s, kind)
		}
	}
	return nil
}
