// Package costsim is the simulated day behind `ax bench cost-sim`: a seeded, deterministic,
// discrete-event replay of a day of arrivals across three regions priced from
// shared/data/prices.csv (embedded), placed by several policies side by side.
//
// The ax policy is the real placement package called as a server calls it: each simulated
// server has its own [placement.Placer] (damping included) over snapshots built from figures the
// simulated regions publish the way region leaders do (every second when a figure moved 5 %,
// else every 2 s; live prices, slots, running, ready, capacity windows, the measured drain rate
// from a [placement.DrainMeter], the learnt run times per (pool, type) folded with the formula
// of queue/scripts/lib.lua and set into the servers' estimator on each publication). A region
// that fails stops publishing; its figures stay in the view until its registration's lease
// expires (the stale window), and a hand-off that cannot connect marks the region a suspect
// in the sender's view and is placed again, as federation's outbox does.
//
// The other policies see the same view: round-robin over eligible pools, cheapest list price,
// and a greedy hindsight schedule that knows every task's true duration in every pool, the
// prices of the whole day, the exact state of every queue and which regions are down. Each
// policy replays the same arrivals (same seed) on its own copy of the world, on a simulated
// clock: a day takes a second or two of CPU.
//
// Costs are what the workers would record: the live price per slot-hour at the claim × the
// task's run time. Waits run from submission to claim, hand-offs and re-placements included.
package costsim
