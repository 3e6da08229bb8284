package view

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ServerInfo is what a server announces under <prefix>servers/<region>/<id>.
type ServerInfo struct {
	Region  string    `json:"region"`
	ID      string    `json:"id"`
	API     string    `json:"api"`
	Started time.Time `json:"started"`
}

// Announce registers this server in the global etcd, bound to a session of
// ttl, until ctx ends (then removes it). Every server's View counts these
// registrations, and placement assumes only 1/count of a pool's headroom
// (docs/architecture.md §5 step 3), so servers bursting at once do not overfill a pool.
// While the global etcd cannot be reached it keeps trying; placement then
// falls back to placement.Config.Servers.
func Announce(ctx context.Context, c *clientv3.Client, prefix string, info ServerInfo, ttl time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	mgr := lease.NewManager(c, lease.WithTTL(ttl), lease.WithLogger(log))
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = mgr.Close(cctx)
	}()
	key := prefix + "servers/" + info.Region + "/" + info.ID
	b, _ := json.Marshal(info)
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		reg, err := lease.Register(rctx, mgr, key, b)
		cancel()
		if err == nil {
			<-ctx.Done()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = reg.Close(cctx)
			cancel()
			return
		}
		log.Debug("announcing the server to the global etcd", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
