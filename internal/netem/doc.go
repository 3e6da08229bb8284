// Package netem emulates a wide-area link between processes on one host, in
// user space (the kernel's sch_netem is not needed): a TCP proxy that delays
// each direction, turns a fraction of segments into retransmission stalls
// and a fraction of connections into resets, and partitions the link (new
// connections' SYNs dropped, open ones black-holed or reset). Tests and
// benchmarks point real processes at its address instead of the target's.
package netem
