package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// MaxBatch is the most specs one POST /v1/tasks/batch may carry (the
// wire contract's bound).
const MaxBatch = apiv1.MaxBatch

// SubmitAll's patience with a saturated server: it waits out this many 429s
// in a row for one batch, each for the server's Retry-After (or
// defaultRetryAfter when it gave none, capped at maxRetryAfter), before it
// gives up. A 429 for a whole batch is a definite refusal, so sending the
// same batch again cannot create a second copy of any task.
const (
	batchAttempts     = 5
	defaultRetryAfter = time.Second
	maxRetryAfter     = 30 * time.Second
)

// ErrBatchTooLarge is returned by SubmitBatch, before any request, for more
// than MaxBatch specs.
var ErrBatchTooLarge = fmt.Errorf("client: a batch holds at most %d tasks", MaxBatch)

// SubmitBatch submits up to MaxBatch specs in one call (POST
// /v1/tasks/batch). Each spec is one JSON object, sent as it is; the
// answer has one result per spec, in order. Items are accepted or refused
// one by one: a refused item is a result with its error, not an error of
// the call.
func (c *Client) SubmitBatch(ctx context.Context, specs []json.RawMessage) (*apiv1.BatchResponse, error) {
	if len(specs) > MaxBatch {
		return nil, ErrBatchTooLarge
	}
	var out apiv1.BatchResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/tasks/batch", nil, apiv1.BatchRequest{Tasks: specs}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(specs) {
		return &out, fmt.Errorf("POST /v1/tasks/batch: %d results for %d tasks", len(out.Results), len(specs))
	}
	return &out, nil
}

// Progress is told, after each batch, how many of total specs have been
// sent and answered.
type Progress func(done, total int)

// SubmitAll submits any number of specs in batches of MaxBatch, in order,
// calling progress (when non-nil) after each batch. It waits out a 429 for
// a whole batch (Retry-After) a few times before giving up.
//
// The answer merges the batches: Results[i] is the result of specs[i].
// When a batch fails, SubmitAll stops and returns what was done so far with
// the error: the specs from len(Results) on were not submitted.
func (c *Client) SubmitAll(ctx context.Context, specs []json.RawMessage, progress Progress) (*apiv1.BatchResponse, error) {
	all := &apiv1.BatchResponse{Results: make([]apiv1.BatchItem, 0, len(specs))}
	for start := 0; start < len(specs); start += MaxBatch {
		end := min(start+MaxBatch, len(specs))
		resp, err := c.submitBatchPatiently(ctx, specs[start:end])
		if err != nil {
			return all, fmt.Errorf("tasks %d–%d of %d: %w", start+1, end, len(specs), err)
		}
		all.Results = append(all.Results, resp.Results...)
		all.Accepted += resp.Accepted
		all.Rejected += resp.Rejected
		if progress != nil {
			progress(end, len(specs))
		}
	}
	return all, nil
}

func (c *Client) submitBatchPatiently(ctx context.Context, batch []json.RawMessage) (*apiv1.BatchResponse, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.SubmitBatch(ctx, batch)
		var apiErr *APIError
		if err == nil || attempt == batchAttempts || !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
			return resp, err
		}
		wait := apiErr.RetryAfter
		if wait <= 0 {
			wait = defaultRetryAfter
		}
		if err := c.sleep(ctx, min(wait, maxRetryAfter)); err != nil {
			return nil, err
		}
	}
}

// EncodeSpecs turns specs into the JSON objects SubmitBatch and SubmitAll
// take.
func EncodeSpecs(specs ...*task.Spec) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("spec %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}
