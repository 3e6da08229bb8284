// Package tlsconf builds the tls.Configs of ax's own hops from PEM file
// paths: the API server's (its certificate, optionally a client CA for
// mutual TLS, both re-read on Reload without a restart), the client side of
// calls to other regions' servers, and the client side of Redis. etcd's TLS
// is the lease package's.
package tlsconf
