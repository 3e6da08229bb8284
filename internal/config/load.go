package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/ax-sched/ax/internal/config/keypath"
)

// EnvPrefix starts the environment variables that override keys: the key's
// path in upper case with dots as underscores, e.g. AX_REDIS_ADDR for
// redis.addr. Every key that holds a value or a list of values can be set
// this way (lists take comma-separated values); lists of mappings and maps
// (pools, limits, tenants, quotas.tenants, auth.tokens, worker.types,
// worker.exec.allow) cannot. With CheckEnv, an AX_ variable meant for a key
// that sets none is an error (see CheckEnv).
const EnvPrefix = "AX"

// Load reads one region's YAML file, applies the environment overrides and
// the defaults, and validates the result. Errors name the file as path was
// given and the key: "configs/x.yaml: pools[2].slots: must be > 0". On error
// the returned error is an Errors listing every problem found. With
// CheckEnv the environment's problems are among them. A key the schema does
// not know is a problem (with the closest known key as a hint), and so is a
// duration written as a bare number rather than a Go duration ("10s").
func Load(path string, opts ...Option) (*Region, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Message: err.Error()}}
	}
	return Parse(path, data, opts...)
}

// Parse is Load for a file already in memory; name is used in errors.
func Parse(name string, data []byte, opts ...Option) (*Region, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	p := &problems{file: name}

	// The file is read twice: by viper, which adds the environment but folds
	// every key to lower case and splits keys at dots, and as plain YAML,
	// which keeps the keys of maps whose keys are data (pool tags, exec rule
	// names and env) as written.
	raw := map[string]any{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		addYAMLError(p, err)
		return nil, p.err()
	}
	if raw == nil {
		raw = map[string]any{}
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		p.add("", "%s", err)
		return nil, p.err()
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	regionType := reflect.TypeFor[Region]()
	for _, key := range keypath.Leaves(regionType, "") {
		if err := v.BindEnv(key); err != nil {
			return nil, fmt.Errorf("config: bind %s: %w", key, err)
		}
	}
	settings := v.AllSettings()
	keypath.KeepData(settings, raw, regionType)

	checkKeys(p, "", raw, regionType)
	r := Default()
	r.source = name
	if pools, ok := raw["pools"].([]any); ok {
		for range pools {
			r.Pools = append(r.Pools, defaultPool())
		}
	}
	decode(p, settings, r)
	r.readSecretFiles(p)
	inheritThresholds(raw, r)
	r.fillDerived(v.IsSet)
	hashTokens(p, r)
	// Validation runs even after decoding problems, so one pass reports
	// everything; a key that failed to decode is reported once, not again
	// for the default it kept.
	r.validate(p)
	nameEnv(p, keypath.Leaves(regionType, ""))
	if o.checkEnv {
		r.ignoredEnv, r.overrideEnv = checkEnv(p, os.Environ(), &o, regionType)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return r, nil
}

// nameEnv says which problems' values came from the environment: the key
// alone would send the operator to a file that does not hold the value.
func nameEnv(p *problems, keys []string) {
	bound := map[string]bool{}
	for _, k := range keys {
		bound[k] = true
	}
	for _, e := range p.list {
		if !bound[e.Key] {
			continue
		}
		name := envName(e.Key)
		if _, set := os.LookupEnv(name); set {
			e.Message += " (from " + name + ")"
		}
	}
}

// addYAMLError reports a YAML syntax error, one line per problem.
func addYAMLError(p *problems, err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		p.add("", "%s", err)
		return
	}
	for _, msg := range te.Errors {
		// The only type the file is decoded into is the top-level mapping.
		if i := strings.Index(msg, ": cannot unmarshal"); i >= 0 {
			msg = msg[:i] + ": the file must be a mapping of keys to values"
		}
		p.add("", "%s", msg)
	}
}

// inheritThresholds completes each pool's own thresholds with the region's:
// a pool that sets only spill keeps the region's alert, pause and resume.
func inheritThresholds(raw map[string]any, r *Region) {
	pools, _ := raw["pools"].([]any)
	for i, rp := range pools {
		m, _ := rp.(map[string]any)
		th, ok := m["thresholds"].(map[string]any)
		if !ok || i >= len(r.Pools) {
			continue
		}
		t := r.Thresholds
		// Problems in this map were reported by the first decode.
		d, err := mapstructure.NewDecoder(decoderConfig(&t))
		if err == nil && d.Decode(th) == nil {
			r.Pools[i].Thresholds = &t
		}
	}
}

// hashTokens replaces each plain token by its SHA-256, so that no plain
// token outlives loading, and lower-cases given hashes.
func hashTokens(p *problems, r *Region) {
	for i := range r.Auth.Tokens {
		t := &r.Auth.Tokens[i]
		key := keypath.Elem("auth.tokens", i)
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			p.add(key, "set token_sha256 or token, not both")
		case t.Token != "":
			if len(t.Token) < minTokenLen {
				p.add(keypath.Join(key, "token"), "too short: use at least %d characters", minTokenLen)
			}
			sum := sha256.Sum256([]byte(t.Token))
			t.TokenSHA256 = hex.EncodeToString(sum[:])
		default:
			t.TokenSHA256 = strings.ToLower(t.TokenSHA256)
		}
		t.Token = ""
	}
}

// minTokenLen keeps guessable tokens out: 16 random characters are far
// beyond brute force over the network.
const minTokenLen = 16
