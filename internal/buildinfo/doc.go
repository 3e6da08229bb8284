// Package buildinfo tells which build of ax is running: the version, commit
// and build date a release build stamps into the binary, and the Go version
// it was built with.
package buildinfo
