// Package dagstore stores DAG runs in a region's Redis: their definitions,
// node states and indexes, each change one script call.
package dagstore
