package server

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"testing"

	"github.com/ax-sched/ax/internal/config"
	"github.com/prometheus/client_golang/prometheus"
)

// Savings count against the cheapest on-demand pool that carries every tag
// of the task, after its discount; spot pools never set the reference.
func TestReferencePriceIsTheCheapestEligibleOnDemandPool(t *testing.T) {
	cfg := &config.Region{Name: "cost-test", Pools: []config.Pool{
		{Name: "od", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.048},
		{Name: "od-big", Tags: map[string]string{"cpu": "x86", "mem": "high"}, PricePerSlotHour: 0.2, Discount: 0.5},
		{Name: "spot", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.5, Spot: true},
	}}
	for _, c := range []struct {
		tags map[string]string
		want float64
	}{
		{map[string]string{"cpu": "x86"}, 0.048},
		{map[string]string{"cpu": "x86", "mem": "high"}, 0.1},
		{map[string]string{"mem": "low"}, 0},
		{nil, 0.048},
	} {
		if got := referencePrice(cfg, c.tags); got != c.want {
			t.Errorf("referencePrice(%v) = %v, want %v", c.tags, got, c.want)
		}
	}
}

// A worker's metrics server: /metrics needs a token of every tenant when
// auth is on and public_details off; /healthz answers anyone (a liveness
// probe holds no token).
func TestWorkerMetricsPrivateHealthzOpen(t *testing.T) {
	sum := sha256.Sum256([]byte("ops-token"))
	cfg := &config.Region{Name: "m", Auth: config.Auth{Enabled: true,
		Tokens: []config.Token{{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]), Role: "operator"}}}}
	srv, err := ServeMetrics("127.0.0.1:0", prometheus.NewRegistry(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + srv.Addr
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "ops-token", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s (token %q): %d, want %d", c.path, c.token, resp.StatusCode, c.want)
		}
	}
}
