// Package view is a server's picture of the federation, from a watch on the
// global etcd: every region's registration and figures, price and
// fair-share overrides, the announced servers, and the placements this
// server made that the figures do not hold yet (Flights), as the placement
// snapshot every placement of the server reads.
package view
