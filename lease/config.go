package lease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config defaults not already set by the option defaults.
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultPrefix      = "/ax/"

	// gRPC pings find a dead connection (a host gone without a FIN) that
	// would otherwise hang until the OS gives up. etcd refuses pings more
	// often than every 5s (--grpc-keepalive-min-time).
	dialKeepAliveTime    = 10 * time.Second
	dialKeepAliveTimeout = 5 * time.Second
)

// Config says how to reach one etcd cluster. ax has two: the regional one
// (cell elections) and the global one (region registrations, the federation
// election, schedules, prices). They are two values of this type; a global
// Config left without endpoints means "the same as the regional one", see Or.
type Config struct {
	Endpoints   []string      // client URLs, e.g. https://etcd-1:2379
	DialTimeout time.Duration // default DefaultDialTimeout
	Username    string        // etcd auth; empty for none
	Password    string
	TLS         TLSFiles
	// SessionTTL of leases (elections, registrations); default
	// DefaultSessionTTL (5s). Use 10s or more for a cluster across a WAN.
	SessionTTL time.Duration
	Prefix     string // key prefix, default DefaultPrefix ("/ax/")
}

// TLSFiles are PEM file paths. CAFile alone verifies the server; CertFile
// and KeyFile together add a client certificate. An https endpoint without
// any file uses the system roots.
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

func (t TLSFiles) enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ConfigError names the configuration key that is wrong.
type ConfigError struct {
	Key string
	Err error
}

func (e *ConfigError) Error() string { return "lease: config " + e.Key + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Or returns c, or fallback when c has no endpoints. A global config is
// regional.Or-ed: global.Or(regional). The fallback is taken whole (TLS,
// credentials, prefix, TTL), never mixed field by field with c.
func (c Config) Or(fallback Config) Config {
	if len(c.Endpoints) == 0 {
		return fallback
	}
	return c
}

// WithDefaults fills the zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	return c
}

// Validate checks c after defaults; errors are *ConfigError.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	if len(c.Endpoints) == 0 {
		bad("endpoints", "no endpoint")
	}
	for i, ep := range c.Endpoints {
		if strings.TrimSpace(ep) == "" {
			bad(fmt.Sprintf("endpoints[%d]", i), "empty")
		}
	}
	if c.SessionTTL < time.Second {
		bad("session_ttl", "%v is below etcd's 1s lease granularity", c.SessionTTL)
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		bad("prefix", "%q must start and end with /", c.Prefix)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls", "cert_file and key_file go together")
	}
	if c.Password != "" && c.Username == "" {
		bad("username", "password given without username")
	}
	return errors.Join(errs...)
}

// Key joins the prefix and a relative key: Key("regions/eu-west") is
// "/ax/regions/eu-west" with the default prefix.
func (c Config) Key(rel string) string {
	return c.WithDefaults().Prefix + strings.TrimPrefix(rel, "/")
}

// Options returns the options that carry this config's session TTL.
func (c Config) Options() []Option {
	return []Option{WithTTL(c.WithDefaults().SessionTTL)}
}

// Dial validates c, connects, and checks the cluster answers a read of the
// prefix before ctx ends, so bad endpoints, TLS or credentials fail at
// start-up with a clear error. The client connects lazily afterwards, so a
// process may also keep retrying Dial in the background while etcd is down.
func (c Config) Dial(ctx context.Context) (*clientv3.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    dialKeepAliveTime,
		DialKeepAliveTimeout: dialKeepAliveTimeout,
		Username:             c.Username,
		Password:             c.Password,
		// ax logs with slog; the lease package reports what matters.
		Logger: zap.NewNop(),
	}
	if c.TLS.enabled() {
		t, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		cfg.TLS = t
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("lease: dial %v: %w", c.Endpoints, err)
	}
	cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), c.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, c.Prefix, clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("lease: dial %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

func (t TLSFiles) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &ConfigError{Key: "tls.ca_file", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Key: "tls.ca_file", Err: fmt.Errorf("%s: no PEM certificate", t.CAFile)}
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &ConfigError{Key: "tls.cert_file", Err: err}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
