// Package client is the Go client of ax's HTTP API (docs/architecture.md §7):
// the `ax` CLI uses it, and so can any program that submits or inspects
// tasks. Requests and answers are the wire types of package apiv1.
package client
