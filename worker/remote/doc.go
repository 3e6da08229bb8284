// Package remote is a worker.Source over the API's worker protocol
// (docs/worker-protocol.md): a worker that holds only server URLs and a
// worker token registers, long-polls its claims and sends its heartbeats,
// progress and outcomes in batched reports, never touching Redis.
//
// A connection error or a 503 moves it to the next URL it was given (the
// registration lives in the region's Redis, so another server of the region
// accepts it and the worker keeps its leases); 429 and 503 wait their
// Retry-After; a 404 for the worker id registers again.
package remote
