// Package handoff moves tasks between regions: the outbox sender that hands
// tasks placed elsewhere to their target region, the receiver that holds
// what it accepts until the sender's word, and the re-placement of READY
// tasks (drain, pools without workers, price rises, closed windows).
package handoff
