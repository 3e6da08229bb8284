// Package endpoint is what every handler of the HTTP API shares: the
// principal a request is served for, the strict decoding of bodies and
// queries, and the errors it answers, each code's HTTP status taken from one
// table (errors.go).
package endpoint
