// Package config reads the operator's configuration of one region (a YAML
// file, configs/example.yaml, plus AX_* environment overrides) into a
// validated Region, with defaults written once in Default and every problem
// named by file and key. Only cmd/ imports it: nothing below cmd knows
// about files, flags or the environment.
package config
