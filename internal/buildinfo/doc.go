// Package buildinfo tells which build of ax is running: the version, commit
// and build date a release build stamps into the binary, and the Go version
// it was built with.
//
// The stamp is three link-time strings, set with
//
//	go build -ldflags "-X github.com/ax-sched/ax/internal/buildinfo.version=v1.2.0
//	  -X github.com/ax-sched/ax/internal/buildinfo.commit=$(git rev-parse HEAD)
//	  -X github.com/ax-sched/ax/internal/buildinfo.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// as `make build` and deploy/docker/Dockerfile do. A plain `go build` or
// `go install` leaves them empty; Get then falls back to what the Go
// toolchain recorded in the binary (the module version, vcs.revision and
// vcs.time), and to "unknown".
package buildinfo
