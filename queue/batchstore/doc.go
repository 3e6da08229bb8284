// Package batchstore keeps batches (package batch) in their home region's
// Redis: one hash per batch with its counts and callbacks, its member ids,
// the members' ends, and the shards' lists of members' ends waiting to be
// reported (queue/scripts/lib.lua batch_end).
package batchstore
