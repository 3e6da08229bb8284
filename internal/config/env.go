package config

import (
	"reflect"
	"sort"
	"strings"

	"github.com/ax-sched/ax/internal/config/keypath"
)

// Option changes how Load and Parse read a region.
type Option func(*options)

type options struct {
	checkEnv bool
	others   map[string]bool
}

// CheckEnv makes Load and Parse look at every AX_ variable of the
// environment, not only at those that name a key. A variable plainly meant
// for the config that sets nothing is a problem, listed with the file's:
//
//   - one a letter or two from a key's variable: "AX_REDIS_ADR names no
//     config key (did you mean AX_REDIS_ADDR?)";
//   - one under a section of keys that names none of them: AX_REDIS_HOST;
//   - one for a key only the file can set (pools, auth.tokens,
//     worker.exec.allow and the other lists of mappings and maps):
//     AX_POOLS, AX_AUTH_TOKENS_0_ROLE.
//
// others are the variables something else reads or sets (ax's flags,
// AX_LOG_FORMAT, what a worker gives the commands it runs): never a
// problem, unless they name a key only the file can set. Kubernetes'
// service links (AX_WORKER_EU_1_SERVICE_HOST, AX_WORKER_EU_1_PORT... of a
// Service named ax-worker-eu-1) are not either. Any other AX_ variable is
// Region.IgnoredEnv's, for the caller to warn of: a shell or a unit file may
// hold variables of other tools.
func CheckEnv(others ...string) Option {
	return func(o *options) {
		o.checkEnv = true
		o.others = map[string]bool{}
		for _, n := range others {
			o.others[n] = true
		}
	}
}

// IgnoredEnv lists, sorted, the AX_ variables that Load or Parse with
// CheckEnv found set and that nothing reads (see CheckEnv). Without
// CheckEnv it is empty.
func (r *Region) IgnoredEnv() []string { return append([]string(nil), r.ignoredEnv...) }

// OverrideEnv lists, sorted, the AX_ variables that Load or Parse with
// CheckEnv found set and that override a key of the file (AX_REDIS_ADDR):
// names only, for a start-up line that says where a value came from (an
// AX_REGION exported for the CLI's --region renames a server's region).
// Without CheckEnv it is empty.
func (r *Region) OverrideEnv() []string { return append([]string(nil), r.overrideEnv...) }

// envName is the variable that overrides key: AX_REDIS_ADDR for redis.addr.
func envName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envSpace is what the environment can and cannot set in a Region.
type envSpace struct {
	keys     map[string]string // variable → key it sets
	fileOnly []string          // keys only the file sets: pools, auth.tokens...
	sections []string          // keys of sections: redis, redis.tls...
}

func newEnvSpace(t reflect.Type) *envSpace {
	s := &envSpace{keys: map[string]string{}}
	s.walk(t, "")
	return s
}

func (s *envSpace) walk(t reflect.Type, path string) {
	fields := keypath.Fields(t)
	for _, name := range keypath.Sorted(fields) {
		f, key := fields[name], keypath.Join(path, name)
		switch {
		case keypath.IsLeaf(f.Type):
			s.keys[envName(key)] = key
		case f.Type.Kind() == reflect.Struct:
			s.sections = append(s.sections, key)
			s.walk(f.Type, key)
		default:
			s.fileOnly = append(s.fileOnly, key)
		}
	}
}

// under returns the longest of keys whose variable is name or starts name
// followed by "_".
func under(name string, keys []string) string {
	best := ""
	for _, k := range keys {
		v := envName(k)
		if (name == v || strings.HasPrefix(name, v+"_")) && len(k) > len(best) {
			best = k
		}
	}
	return best
}

// closest returns the variable of a key that name probably misspells: one
// or, for longer names, two edits away, or the one key name is the start
// of (AX_REDIS_SENTINEL_MASTER for AX_REDIS_SENTINEL_MASTER_NAME).
func (s *envSpace) closest(name string) string {
	rest := len(name) - len(EnvPrefix) - 1
	maxDist := 0
	switch {
	case rest >= 8:
		maxDist = 2
	case rest >= 4:
		maxDist = 1
	}
	best, bestDist := "", maxDist+1
	var starts []string
	for _, v := range keypath.Sorted(s.keys) {
		if d := keypath.Distance(name, v); d < bestDist {
			best, bestDist = v, d
		}
		if strings.HasPrefix(v, name+"_") {
			starts = append(starts, v)
		}
	}
	if best == "" && len(starts) == 1 {
		best = starts[0]
	}
	return best
}

// serviceLinks returns the variables Kubernetes sets for every Service of
// the namespace whose name starts with "ax-": NAME_SERVICE_HOST,
// NAME_SERVICE_PORT[_PORTNAME], NAME_PORT and NAME_PORT_<port>_<proto>[_...].
func serviceLinks(set map[string]bool) map[string]bool {
	links := map[string]bool{}
	for name := range set {
		base, ok := strings.CutSuffix(name, "_SERVICE_HOST")
		if !ok {
			continue
		}
		for n := range set {
			if n == name || n == base+"_SERVICE_PORT" || strings.HasPrefix(n, base+"_SERVICE_PORT_") ||
				n == base+"_PORT" || strings.HasPrefix(n, base+"_PORT_") {
				links[n] = true
			}
		}
	}
	return links
}

// checkEnv reports the AX_ variables of environ that are meant for the
// config but set nothing (see CheckEnv) and returns the others nothing
// reads, and those that set a key.
func checkEnv(p *problems, environ []string, o *options, t reflect.Type) (ignored, overrides []string) {
	set := map[string]bool{}
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, EnvPrefix+"_") {
			set[name] = true
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	s := newEnvSpace(t)
	links := serviceLinks(set)
	for _, name := range keypath.Sorted(set) {
		if s.keys[name] != "" {
			overrides = append(overrides, name)
			continue
		}
		if links[name] {
			continue
		}
		up := strings.ToUpper(name) // AX_redis_addr is no override either
		if k := under(up, s.fileOnly); k != "" {
			p.add("", "%s cannot set %s: it comes from the file only (the environment sets single values and lists of them)", name, k)
			continue
		}
		if o.others[name] {
			continue
		}
		if v := s.closest(up); v != "" {
			p.add("", "%s names no config key (did you mean %s?)", name, v)
			continue
		}
		if k := under(up, s.sections); k != "" {
			p.add("", "%s names no config key of %s (configs/example.yaml lists them)", name, k)
			continue
		}
		ignored = append(ignored, name)
	}
	sort.Strings(ignored)
	return ignored, overrides
}
