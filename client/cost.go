package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/ax-sched/ax/apiv1"
)

// CostFilter selects a cost report (GET /v1/cost): UTC days From..To
// (YYYY-MM-DD, inclusive; "" the server's default, this month so far),
// grouped by GroupBy (apiv1.CostGroups; nil the server's default), of one
// Tenant and one Region when set.
type CostFilter struct {
	From, To       string
	GroupBy        []string
	Tenant, Region string
}

// Cost reads a cost report gathered from every region (docs/cost.md).
func (c *Client) Cost(ctx context.Context, f CostFilter) (*apiv1.CostReport, error) {
	q := url.Values{}
	for k, v := range map[string]string{"from": f.From, "to": f.To, "tenant": f.Tenant, "region": f.Region} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.GroupBy != nil {
		q.Set("group_by", strings.Join(f.GroupBy, ","))
	}
	var out apiv1.CostReport
	if _, err := c.do(ctx, http.MethodGet, "/v1/cost", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
