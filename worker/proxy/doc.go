// Package proxy is a worker in the region's store for the workers that reach
// it through the API's worker protocol: it claims, heartbeats and records
// outcomes on their behalf, and gives back what they may not or can no longer
// take.
package proxy
