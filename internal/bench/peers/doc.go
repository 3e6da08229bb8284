// Package peers is `ax bench compare`: it runs ax and other Redis queues'
// throughput programs (internal/bench/compare) in turns and reports their
// medians side by side.
package peers
