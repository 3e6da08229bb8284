// Package bench is the load generator behind `ax bench`: it drives a
// region's task store and the worker runtime directly, as a worker process
// does, against a Redis it is given or a temporary redis-server it starts,
// and reports what it measured as a Summary (human text or JSON, with
// deltas against an earlier Summary).
//
// Modes, one function each (here or in a sub-package):
//
//   - Throughput: no-op tasks submitted (one per call and in batches), then
//     drained by in-process workers, then submitted while draining.
//   - Latency: open-loop submission at a fixed rate; ready→start and
//     submit→done percentiles, and the pickup of a woken idle worker.
//   - delayed.Run (internal/bench/delayed): many delayed tasks due at the
//     same moment, promoted by the leader's promote call in bounded
//     batches; rate, lateness, longest script (SLOWLOG); delayed.Cold the
//     cold tier.
//   - Stress: the seed article's scenario scaled to one machine: tenants,
//     random durations, injected transient failures, retries.
//   - Placement: placement decisions per second over synthetic pools.
//   - api.Run (internal/bench/api): the HTTP API path through real ax
//     processes.
//   - CostSim: a simulated day of cost-aware placement (package costsim):
//     ax's placement vs round-robin, cheapest list price and greedy
//     hindsight; no Redis.
//
// Every figure is a measurement of one run on one machine, never an
// assertion: the package's tests run tiny sizes and check that the counts
// add up, not how fast anything was.
//
// This package is the core the modes share: Env (the Redis and store),
// Summary, Meter, Samples, and the submit and wait helpers. It imports
// queue, worker, placement and client; nothing imports it but its command
// (internal/bench/command) and its sub-packages.
package bench
