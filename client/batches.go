package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ax-sched/ax/apiv1"
)

// Batches (POST /v1/batches): tasks submitted together with callbacks that
// run once every member has ended. They are functions of the package, as
// Wait is, taking the Client.

// CreateBatch submits req's tasks as one batch (up to
// apiv1.MaxBatchMembers; the server submits them in parts) and answers
// the batch: its id, counts, and the members it refused (Rejected, by
// index; they are not part of it). With req.IdempotencyKey a repeat of the
// request creates nothing and answers the first create's batch
// (Duplicate); the key with another request is a 409 *Error naming
// idempotency_key, and a repeat while the first is still creating a 503
// with a Retry-After.
func CreateBatch(ctx context.Context, c *Client, req apiv1.BatchCreate) (*apiv1.BatchStatus, error) {
	var out apiv1.BatchStatus
	if _, err := c.do(ctx, http.MethodPost, "/v1/batches", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetBatch reads a batch from any server of any region: its counts by
// state and the ids of its failed and canceled members.
func GetBatch(ctx context.Context, c *Client, id string) (*apiv1.BatchStatus, error) {
	var out apiv1.BatchStatus
	if _, err := c.do(ctx, http.MethodGet, "/v1/batches/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListBatches reads the batches of every region, newest first (limit 0:
// the server's default), from cursor after ("": the newest); the regions
// that did not answer are in the answer's Unavailable.
func ListBatches(ctx context.Context, c *Client, limit int, after string) (*apiv1.BatchList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	var out apiv1.BatchList
	if _, err := c.do(ctx, http.MethodGet, "/v1/batches", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelBatch asks every member of the batch not ended yet to stop; its
// callbacks run once they have ended.
func CancelBatch(ctx context.Context, c *Client, id string) (*apiv1.BatchStatus, error) {
	var out apiv1.BatchStatus
	if _, err := c.do(ctx, http.MethodPost, "/v1/batches/"+url.PathEscape(id)+"/cancel", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
