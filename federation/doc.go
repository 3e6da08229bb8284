// Package federation is what every ax server does beyond its own region,
// assembled as one Node from its parts: the submit pipeline (package
// submit) places submitted tasks on the cheapest healthy pool across
// regions (package pick) and stores them, hand-offs (package handoff) move
// tasks to the regions they were placed in and receive theirs, reads and
// actions (package fanout) follow a task wherever it lives and ask every
// region for what spans the federation, and the global view (package view)
// and budgets (package budget) are what they decide by.
package federation
