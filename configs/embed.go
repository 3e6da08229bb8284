// Package configs holds the operator configs shipped with ax: the dev set
// (three regions on three providers, used by `ax dev`) and example.yaml,
// which documents every key.
package configs

import "embed"

// Dev holds configs/dev/*.yaml.
//
//go:embed dev/*.yaml
var Dev embed.FS
