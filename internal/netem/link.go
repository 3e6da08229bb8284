package netem

import (
	"math/rand/v2"
	"time"
)

// Link is how the emulated path treats traffic. The zero Link forwards at
// once and loses nothing.
type Link struct {
	// Delay is added to every segment in each direction (one way): a
	// round trip through the proxy takes 2 × Delay more.
	Delay time.Duration
	// Jitter spreads each segment's delay uniformly over Delay ± Jitter;
	// segments stay in order, as TCP delivers them.
	Jitter time.Duration
	// Loss is the fraction of segments lost on the way. TCP recovers each
	// by a retransmission, so a lost segment (and everything behind it on
	// the connection) arrives one retransmission timeout late, doubling for
	// every retransmission lost too.
	Loss float64
	// RTO is the first retransmission timeout; 0: 200 ms + 2 × Delay
	// (Linux's minimum plus the round trip).
	RTO time.Duration
	// Reset is the fraction of connections reset (RST both ways) after
	// their first few segments, as a middlebox losing its state would.
	Reset float64
}

// rto is the first retransmission timeout of l.
func (l Link) rto() time.Duration {
	if l.RTO > 0 {
		return l.RTO
	}
	return 200*time.Millisecond + 2*l.Delay
}

// transit is how long one segment takes across l, stalls included.
func (l Link) transit(rng *rand.Rand) time.Duration {
	d := l.Delay
	if l.Jitter > 0 {
		d += time.Duration(rng.Int64N(int64(2*l.Jitter)+1)) - l.Jitter
	}
	for rto := l.rto(); l.Loss > 0 && rng.Float64() < l.Loss; rto *= 2 {
		d += rto
		if rto > time.Minute {
			break
		}
	}
	return max(d, 0)
}

// resetAfter is after how many segments a new connection is reset; 0:
// never.
func (l Link) resetAfter(rng *rand.Rand) int {
	if l.Reset <= 0 || rng.Float64() >= l.Reset {
		return 0
	}
	return 1 + rng.IntN(8)
}
