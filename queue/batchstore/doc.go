// Package batchstore keeps batches (package batch) in their home region's
// Redis: one hash per batch with its counts and callbacks, its member ids,
// the members' ends, and the shards' lists of members' ends waiting to be
// reported (queue/scripts/lib.lua batch_end).
//
// Key layout (every key of one batch shares the hash tag {batch:<id>}, so
// its scripts stay on one Redis Cluster slot):
//
//	ax:{batch:<id>}:b    HASH   tn tenant, nm name, st RUNNING|COMPLETED,
//	                            n members recorded, sl sealed ('1': every
//	                            member recorded), ok/fl/cx members ended
//	                            SUCCESS/FAILED/CANCELED, ca/fa created and
//	                            completed (ms), d callbacks (JSON), cb
//	                            callback state (none, '', due, sent), cq
//	                            cancel requested
//	ax:{batch:<id>}:ids  LIST   member ids, in the order given
//	ax:{batch:<id>}:m    HASH   member id → S, F or C: its first reported end
//	ax:{batches}:idx     ZSET   batch id → created (ms): listings
//	ax:{batches}:open    ZSET   batch id → created (ms): callbacks not sent yet
//	ax:{s}:bdone         LIST   "<batch> <member> <code>": ends of members this
//	                            shard ended, not yet reported (lib.lua)
//
// Boundary: batchstore → queue (the engine and its script runner), task.
package batchstore
