package federation

import (
	"context"
	"time"
)

// flightsLook is how often FlightsLoop looks for awaited hand-offs that
// left the outbox: a fraction of a figures' publish, so a pool's fill is
// never counted twice for long.
const flightsLook = 50 * time.Millisecond

// FlightsLoop lands the hand-offs this server placed and another server of
// the region sends (view.Flights.Await) once they leave the region's
// outbox — accepted by their target, or refused and placed again — so
// placement counts them in flight exactly as long as the target's figures
// cannot hold them, however slow the sender. It reads nothing while none
// is awaited, and runs until ctx ends.
func (n *Node) FlightsLoop(ctx context.Context) {
	t := time.NewTicker(flightsLook)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := n.flights.Awaited()
		if len(ids) == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		in, err := n.store.HandOffs().InOutbox(lctx, ids)
		cancel()
		if err != nil {
			continue // horizon forgets them if the store stays out
		}
		now := n.cfg.Now()
		for i, id := range ids {
			if !in[i] {
				n.flights.Landed(id, now)
			}
		}
	}
}
