package federation_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
)

// Servers announce themselves in the global etcd; every View counts them
// and its snapshots carry the count, so placement shares each pool's
// headroom among them. A server that stops is no longer counted.
func TestViewCountsAnnouncedServers(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := e.Client()
	v := view.New(c, "/ax/", placement.DefaultConfig(), time.Second, nil)
	t.Cleanup(v.Close)
	if n := v.Pools().Servers(); n != 0 {
		t.Fatalf("servers before any announcement: %d", n)
	}
	var wg sync.WaitGroup
	cancels := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b", "c"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[id] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			view.Announce(ctx, c, "/ax/", view.ServerInfo{Region: "r1", ID: id, API: "http://" + id}, 2*time.Second, nil)
		}()
	}
	t.Cleanup(func() {
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
	})
	fedtest.Eventually(t, 10*time.Second, "three servers counted", func() bool { return v.Pools().Servers() == 3 })
	cancels["b"]()
	fedtest.Eventually(t, 10*time.Second, "two servers after one stopped", func() bool { return v.Pools().Servers() == 2 })
}

// GET /v1/regions shows each region's announced servers.
func TestRegionsShowAnnouncedServers(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	done := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		view.Announce(cctx, f.EtcdCli, "/ax/", view.ServerInfo{Region: aws, ID: "extra", API: "http://x"}, 2*time.Second, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	fedtest.Eventually(t, 10*time.Second, "aws shows its announced server", func() bool {
		var r apiv1.RegionsResponse
		f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/regions", tokAcme, nil).Want(t, 200).JSON(t, &r)
		for _, g := range r.Regions {
			if g.Name == aws {
				return g.Servers == 1
			}
		}
		return false
	})
}
