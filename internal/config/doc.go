// Package config reads the operator's configuration of one region: a YAML
// file (configs/example.yaml lists every key) plus AX_* environment
// overrides, read with viper.
//
// It is the only package that reads configuration files, and only cmd/
// imports it: cmd turns a Region into the plain values that queue, lease,
// placement, region and federation take, so nothing below cmd knows about
// files, flags or the environment.
//
// Load gives either a complete Region or every problem with the file at
// once, each naming the file and the key:
//
//	configs/x.yaml: pools[2].slots: must be > 0
//	configs/x.yaml: pools[0].slot: unknown key (did you mean "slots"?)
//
// The rules it keeps:
//
//   - Defaults live in one place, Default; keys that default to other keys
//     (public_addr, regions, etcd.global, redis.addr) are listed there.
//   - Unknown keys are errors, so a misspelt key is never silently ignored.
//   - Durations are Go duration strings ("10s"); a bare number is an error
//     rather than nanoseconds.
//   - The environment overrides a key through AX_ and its path with "_" for
//     "." (AX_REDIS_ADDR, AX_AUTH_CLUSTER_TOKEN); lists are comma-separated.
//     Lists of mappings and maps (pools, limits, tenants, quotas.tenants,
//     auth.tokens, worker.types, worker.exec.allow) come only from the file.
//   - With CheckEnv (ax server, worker and dev), an AX_ variable meant for
//     the config that sets nothing is a problem like an unknown key: a
//     typo (AX_REDIS_ADR, "did you mean AX_REDIS_ADDR?"), a name under a
//     section that has no such key, or a key only the file sets. Names the
//     caller says are its own (ax's flags) are not; the rest are listed by
//     Region.IgnoredEnv for a warning.
//   - viper folds keys to lower case; keys are therefore written in lower
//     case, and the keys of maps that hold data (pool tags, exec rule names
//     and their env) are taken from the file as written.
//   - Plain API tokens are hashed with SHA-256 while loading and dropped,
//     so only hashes stay in memory.
package config
