// Package queue is the engine of a region's task store, the only code (with
// its stage sub-packages) that touches the region's Redis: the client and
// its shards, the key layout (keys.go), the Lua scripts and their runner,
// and one table of the scripts' result codes (codes.go).
package queue
