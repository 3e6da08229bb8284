// Package cli is the environment every client command of ax runs in: the
// API client built from --api, --token and the TLS flags, the output
// format (-o table or json), the time zone of the times printed (--local),
// the command's streams, and the exit statuses its errors carry (usage 2,
// auth 3, anything else 1; package main prints each on one line). A
// command's body is a func(ctx, *Env, args) that Run adapts to cobra; the
// commands of package main and of cmd/ax/internal/*cli all use it.
package cli
