package lease

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ax-sched/ax/internal/testenv"
)

func TestConfigDefaultsAndOr(t *testing.T) {
	regional := Config{Endpoints: []string{"http://regional:2379"}, Username: "ax", Password: "pw"}
	global := Config{Endpoints: []string{"https://global:2379"}, SessionTTL: 15 * time.Second}

	tests := []struct {
		name string
		got  Config
		want Config
	}{
		{"empty global means the regional cluster", Config{}.Or(regional), regional},
		{"a global with endpoints stands alone", global.Or(regional), global},
		{"defaults fill the zero fields", regional.WithDefaults(), Config{
			Endpoints: regional.Endpoints, Username: "ax", Password: "pw",
			DialTimeout: DefaultDialTimeout, SessionTTL: DefaultSessionTTL, Prefix: "/ax/",
		}},
		{"defaults keep what is set", global.WithDefaults(), Config{
			Endpoints: global.Endpoints, DialTimeout: DefaultDialTimeout, SessionTTL: 15 * time.Second, Prefix: "/ax/",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
	if got := (Config{}).Key("regions/eu-west"); got != "/ax/regions/eu-west" {
		t.Fatalf("Key = %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Endpoints: []string{"http://e:2379"}}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantKey string // "" when valid
	}{
		{"valid with defaults", func(*Config) {}, ""},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "endpoints"},
		{"blank endpoint", func(c *Config) { c.Endpoints = []string{"http://e:2379", " "} }, "endpoints[1]"},
		{"ttl below a second", func(c *Config) { c.SessionTTL = 500 * time.Millisecond }, "session_ttl"},
		{"prefix without trailing slash", func(c *Config) { c.Prefix = "/ax" }, "prefix"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "c.pem" }, "tls"},
		{"password without user", func(c *Config) { c.Password = "pw" }, "username"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.wantKey {
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.wantKey)
			}
		})
	}
}

func TestConfigDial(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	ctx := testCtx(t)

	c, err := Config{Endpoints: []string{e.Endpoint()}}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Put(ctx, "/ax/dialled", "yes"); err != nil {
		t.Fatal(err)
	}

	dead := "http://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if c, err := (Config{Endpoints: []string{dead}}).Dial(dctx); err == nil {
		_ = c.Close()
		t.Fatal("Dial succeeded against a closed port")
	}
	if _, err := (Config{Endpoints: []string{e.Endpoint()}, TLS: TLSFiles{CAFile: "/nonexistent/ca.pem"}}).Dial(ctx); err == nil {
		t.Fatal("Dial succeeded with a missing CA file")
	}
}
