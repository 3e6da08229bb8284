package config

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ax-sched/ax/internal/config/keypath"
)

// clearAXEnv unsets every AX_ variable of the test process (restored after
// the test), so that only the test's own count.
func clearAXEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// A mistyped variable, one under a section that names no key and one for a
// key only the file sets are problems listed with the file's own; the
// variables of keys, of others (ax's flags), Kubernetes' service links and
// unknown names that look like no key are not.
func TestCheckEnvReportsVariablesThatSetNothing(t *testing.T) {
	clearAXEnv(t)
	for k, v := range map[string]string{
		"AX_REDIS_ADR":                   "10.0.0.1:6379",
		"AX_LEASE_DURATON":               "10s",
		"AX_REDSI_ADDR":                  "10.0.0.1:6379",
		"AX_REDIS_SENTINEL_MASTER":       "m",
		"AX_REDIS_HOST":                  "10.0.0.1",
		"AX_POOLS":                       "[{name: cpu}]",
		"AX_POOLS_0_SLOTS":               "8",
		"AX_AUTH_TOKENS":                 "x",
		"AX_WORKER_EXEC_ALLOW_ECHO_ARGV": "echo",
		"AX_TENANTS":                     "acme",
		// Fine: a key, another's variable, service links, unknown names.
		"AX_REDIS_ADDR":                       "10.0.0.2:6379",
		"AX_API":                              "http://x",
		"AX_WORKER_EU_1_SERVICE_HOST":         "10.96.0.7",
		"AX_WORKER_EU_1_SERVICE_PORT":         "9101",
		"AX_WORKER_EU_1_SERVICE_PORT_METRICS": "9101",
		"AX_WORKER_EU_1_PORT":                 "tcp://10.96.0.7:9101",
		"AX_WORKER_EU_1_PORT_9101_TCP_ADDR":   "10.96.0.7",
		"AX_SUBMIT_N":                         "20000",
		"AX_TAGS":                             `{"gpu":"a100"}`, // near a flag's AX_TAG, no key's
	} {
		t.Setenv(k, v)
	}
	_, err := Parse("test.yaml", []byte(minimal+"retry: {max_retries: -1}\n"), CheckEnv("AX_API", "AX_TAG", "AX_TENANTS"))
	want := []string{
		`test.yaml: retry.max_retries: must be ≥ 0, got -1`,
		`test.yaml: AX_AUTH_TOKENS cannot set auth.tokens: it comes from the file only (the environment sets single values and lists of them)`,
		`test.yaml: AX_LEASE_DURATON names no config key (did you mean AX_LEASE_DURATION?)`,
		`test.yaml: AX_POOLS cannot set pools: it comes from the file only (the environment sets single values and lists of them)`,
		`test.yaml: AX_POOLS_0_SLOTS cannot set pools: it comes from the file only (the environment sets single values and lists of them)`,
		`test.yaml: AX_REDIS_ADR names no config key (did you mean AX_REDIS_ADDR?)`,
		`test.yaml: AX_REDIS_HOST names no config key of redis (configs/example.yaml lists them)`,
		`test.yaml: AX_REDIS_SENTINEL_MASTER names no config key (did you mean AX_REDIS_SENTINEL_MASTER_NAME?)`,
		`test.yaml: AX_REDSI_ADDR names no config key (did you mean AX_REDIS_ADDR?)`,
		`test.yaml: AX_TENANTS cannot set tenants: it comes from the file only (the environment sets single values and lists of them)`,
		`test.yaml: AX_WORKER_EXEC_ALLOW_ECHO_ARGV cannot set worker.exec.allow: it comes from the file only (the environment sets single values and lists of them)`,
	}
	if diff := cmp.Diff(want, problemLines(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	// Without the mistakes the region loads, the unknown names listed for
	// a warning; without CheckEnv nothing is looked at.
	for _, k := range []string{"AX_REDIS_ADR", "AX_LEASE_DURATON", "AX_REDSI_ADDR", "AX_REDIS_SENTINEL_MASTER", "AX_REDIS_HOST",
		"AX_POOLS", "AX_POOLS_0_SLOTS", "AX_AUTH_TOKENS", "AX_WORKER_EXEC_ALLOW_ECHO_ARGV", "AX_TENANTS"} {
		os.Unsetenv(k)
	}
	t.Setenv("AX_REDIS_ADR", "10.0.0.1:6379")
	r, err := Parse("test.yaml", []byte(minimal))
	if err != nil || len(r.IgnoredEnv()) != 0 {
		t.Fatalf("without CheckEnv: %v, ignored %v", err, r.IgnoredEnv())
	}
	os.Unsetenv("AX_REDIS_ADR")
	r, err = Parse("test.yaml", []byte(minimal), CheckEnv("AX_API", "AX_TAG"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"AX_SUBMIT_N", "AX_TAGS"}, r.IgnoredEnv()); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
	if r.Redis.Addr != "10.0.0.2:6379" {
		t.Errorf("redis.addr %q: AX_REDIS_ADDR not applied", r.Redis.Addr)
	}
	// The variables that set a key, by name only (a start-up line).
	if diff := cmp.Diff([]string{"AX_REDIS_ADDR"}, r.OverrideEnv()); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
}

// Short names are not matched loosely: AX_DB is no typo of any key. Case
// counts: AX_redis_addr sets nothing.
func TestCheckEnvShortNamesAreNotTypos(t *testing.T) {
	clearAXEnv(t)
	t.Setenv("AX_DB", "1")
	t.Setenv("AX_REGON", "eu-west") // long enough: one edit from AX_REGION
	t.Setenv("AX_redis_addr", "10.0.0.1:6379")
	_, err := Parse("test.yaml", []byte(minimal), CheckEnv())
	want := []string{
		`test.yaml: AX_REGON names no config key (did you mean AX_REGION?)`,
		`test.yaml: AX_redis_addr names no config key (did you mean AX_REDIS_ADDR?)`,
	}
	if diff := cmp.Diff(want, problemLines(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// The keys only the file sets are the ones the documentation lists
// (EnvPrefix, doc.go, README, configs/example.yaml), no two keys share a
// variable, and no key's variable lies under one of a file-only key (it
// would be refused).
func TestEnvSpace(t *testing.T) {
	s := newEnvSpace(reflect.TypeFor[Region]())
	want := []string{"auth.tokens", "limits", "pools", "quotas.tenants", "tenants", "worker.exec.allow", "worker.types"}
	got := append([]string(nil), s.fileOnly...)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file-only keys (-want +got):\n%s", diff)
	}
	if n := len(keypath.Leaves(reflect.TypeFor[Region](), "")); n != len(s.keys) {
		t.Errorf("%d keys but %d variables: two keys share one", n, len(s.keys))
	}
	for v, k := range s.keys {
		if f := under(v, s.fileOnly); f != "" {
			t.Errorf("%s (%s) lies under file-only %s", v, k, f)
		}
	}
}
