package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Regions lists the regions with their leaders and pools (GET /v1/regions).
// GlobalView is false when the server answers from its last known view.
func (c *Client) Regions(ctx context.Context) (*apiv1.RegionsResponse, error) {
	var out apiv1.RegionsResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/regions", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Drain moves a region's READY tasks elsewhere (POST
// /v1/regions/{region}/drain).
func (c *Client) Drain(ctx context.Context, region string) (*apiv1.DrainResponse, error) {
	var out apiv1.DrainResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/regions/"+url.PathEscape(region)+"/drain", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Explain asks where the spec would be placed now, with every candidate
// pool's filters and score parts (POST /v1/placement/explain). Nothing is
// submitted or counted.
func (c *Client) Explain(ctx context.Context, spec *task.Spec) (*apiv1.Explanation, error) {
	if spec == nil {
		return nil, errors.New("client: Explain: nil spec")
	}
	var out apiv1.Explanation
	if _, err := c.do(ctx, http.MethodPost, "/v1/placement/explain", nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Events long-polls a region's event stream (GET
// /v1/events?region=&after=&wait=): it returns the events after the cursor
// after, waiting up to wait for the first. An empty region is the server's
// own; an empty after starts at new events. Pass Next back as after to
// continue. ctx must outlive wait.
func (c *Client) Events(ctx context.Context, region, after string, wait time.Duration) (*apiv1.EventsResponse, error) {
	q := url.Values{}
	if region != "" {
		q.Set("region", region)
	}
	if after != "" {
		q.Set("after", after)
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out apiv1.EventsResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/events", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health checks liveness (GET /healthz): nil when the server answers 2xx.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
	return err
}

// Ready checks readiness (GET /readyz): nil when the server is ready; an
// *APIError (503) whose message says what is missing otherwise.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
	return err
}
