// Package handoff serves the internal endpoints other ax servers call with
// the cluster token: the receiving side of hand-offs and of schedule firings.
package handoff
