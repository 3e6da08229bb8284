// Package costsim is the simulated day behind `ax bench cost-sim`: a seeded, deterministic,
// discrete-event replay of a day of arrivals across three regions priced from
// shared/data/prices.csv (embedded), placed by several policies side by side.
package costsim
