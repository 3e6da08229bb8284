package history

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// Defaults of Config.
const (
	EveryDefault = 15 * time.Second
	KeepDefault  = 240 // an hour of samples at EveryDefault
	// sampleTimeout bounds one look (the spend is read from every region).
	sampleTimeout = 10 * time.Second
)

// Sample is what one look saw, before it is scoped to a caller.
type Sample struct {
	At      time.Time
	Regions []apiv1.HistoryRegion
	// Succeeded and Failed are this server's region's tasks that ended so,
	// since its store began; ok false when its Redis did not answer.
	Succeeded, Failed int
	Counted           bool
	// Submitted is this server's accepted submits since it started, by tenant.
	Submitted map[string]float64
	// Spend is today's (UTC) spend by tenant in the regions that answered;
	// nil when it could not be read.
	Spend map[string]float64
}

// Config of a Ring.
type Config struct {
	Every time.Duration // between samples; 0: EveryDefault
	Keep  int           // samples kept; 0: KeepDefault
	// Look takes one sample (its At is set by the ring).
	Look func(ctx context.Context) Sample
	Now  func() time.Time // nil: time.Now
}

// Ring is a server's recent samples, oldest first. The server's own ring
// rather than Prometheus: the dashboard then needs nothing but the API and
// its token, shows the same figures in ax dev as in a federation, and a
// tenant's token sees only its tenant's figures. Its price: history starts
// when the server did; Grafana (deploy/grafana) is the long view.
type Ring struct {
	cfg     Config
	mu      sync.Mutex
	samples []Sample
}

// New is an empty ring of cfg.
func New(cfg Config) *Ring {
	cfg.Every = cmp.Or(cfg.Every, EveryDefault)
	cfg.Keep = cmp.Or(cfg.Keep, KeepDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ring{cfg: cfg}
}

// Run samples at once and then every Config.Every until ctx ends. One
// loop per ring: the server that owns it starts it and waits for it.
func (r *Ring) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		r.Look(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Look takes one sample now and keeps it (the oldest goes past Keep).
func (r *Ring) Look(ctx context.Context) {
	if r.cfg.Look == nil || ctx.Err() != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	s := r.cfg.Look(lctx)
	cancel()
	s.At = r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) >= r.cfg.Keep {
		r.samples = slices.Delete(r.samples, 0, len(r.samples)-r.cfg.Keep+1)
	}
	r.samples = append(r.samples, s)
}

// Routes serve GET /v1/history.
func (r *Ring) Routes() []endpoint.Route {
	return []endpoint.Route{{Pattern: "GET /v1/history", Role: endpoint.RoleSubmitter, Handle: r.get}}
}

// get answers the samples since ?minutes= ago (1..60, default 60), the
// tenant figures summed over the caller's tenants: all for a token of every
// tenant (or ?tenant=), its own for a tenant's token (another is 403).
func (r *Ring) get(w http.ResponseWriter, req *http.Request, p endpoint.Principal) error {
	q, err := endpoint.ParseQuery(req.URL.RawQuery, "minutes", "tenant")
	if err != nil {
		return err
	}
	minutes := 60
	if v := q.Get("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 60 {
			return &endpoint.Error{Code: apiv1.CodeInvalid, Field: "minutes", Msg: "must be a whole number of minutes, 1 to 60"}
		}
		minutes = n
	}
	tenant, err := p.Scope(q.Get("tenant"), "read the history of")
	if err != nil {
		return err
	}
	since := r.cfg.Now().Add(-time.Duration(minutes) * time.Minute)
	resp := apiv1.HistoryResponse{EverySeconds: int(r.cfg.Every / time.Second), Tenant: tenant, Samples: []apiv1.HistorySample{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.At.Before(since) {
			continue
		}
		hs := apiv1.HistorySample{At: s.At, Regions: s.Regions, Submitted: sum(s.Submitted, tenant)}
		if hs.Regions == nil {
			hs.Regions = []apiv1.HistoryRegion{} // a look before the view had any region
		}
		if s.Counted {
			hs.Succeeded, hs.Failed = &s.Succeeded, &s.Failed
		}
		if s.Spend != nil {
			v := sum(s.Spend, tenant)
			hs.SpendUSD = &v
		}
		resp.Samples = append(resp.Samples, hs)
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// sum is m's total, or tenant's alone when tenant is set.
func sum(m map[string]float64, tenant string) float64 {
	if tenant != "" {
		return m[tenant]
	}
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}
