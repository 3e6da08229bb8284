package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry is a registry with the Go runtime and process collectors:
// one per server, and in `ax dev` one per region (each region's API
// exports its own series only), which the region's workers share.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// WorkerMetrics registers the figures of cfg's workers with reg: cost =
// price at claim × run time (one slot per task); savings against the
// cheapest on-demand pool of the region that carries the task's tags (the
// reference of GET /v1/cost, which looks at every region: docs/cost.md).
func WorkerMetrics(cfg *config.Region, reg prometheus.Registerer) *worker.Metrics {
	return worker.NewMetrics(reg, worker.MetricsOptions{Region: cfg.Name,
		ReferencePrice: func(tags map[string]string) float64 { return referencePrice(cfg, tags) }})
}

// ServeMetrics exposes g on addr (/metrics): a worker's --metrics, behind
// the same authentication as the servers' /metrics (cfg's auth and
// http_server.public_details), and /healthz (open, no data) for a
// liveness probe that holds no token.
func ServeMetrics(addr string, g prometheus.Gatherer, cfg *config.Region, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", httpapi.MetricsHandler(apiAuth(cfg, log), cfg.HTTPServer.PublicDetails, g))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("metrics listening", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Warn("metrics server", "err", err)
		}
	}()
	return srv, nil
}

// referencePrice is the lowest effective price of an on-demand pool whose
// tags include every tag of the task (0 when none).
func referencePrice(cfg *config.Region, tags map[string]string) float64 {
	best, found := 0.0, false
	for _, p := range cfg.Pools {
		if p.Spot {
			continue
		}
		ok := true
		for k, v := range tags {
			if p.Tags[k] != v {
				ok = false
				break
			}
		}
		if price := p.PricePerSlotHour * (1 - p.Discount); ok && (!found || price < best) {
			best, found = price, true
		}
	}
	return best
}
