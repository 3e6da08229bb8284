// Package workers serves the remote worker protocol (docs/worker-protocol.md):
// workers with a worker token register, long-poll for tasks this server
// claims in the region's Redis on their behalf, and report heartbeats,
// progress and outcomes in batches.
package workers
