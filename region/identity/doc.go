// Package identity marks a region's Redis with who owns it — the
// federation, the region and its shards — at first start, and refuses every
// new connection to a Redis marked for someone else, so a server or worker
// whose address now reaches another federation's Redis (a port reused
// after a restart) serves nothing from it.
package identity
