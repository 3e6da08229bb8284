// Package peer is a server's client of the other regions' servers: calls
// with the cluster token and a hop count, the regions of the federation,
// and the errors a peer's answer (or its silence) becomes.
package peer
