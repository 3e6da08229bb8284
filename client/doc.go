// Package client is the Go client of ax's HTTP API (docs/architecture.md §7). The `ax`
// CLI uses it, and so can any program that submits or inspects tasks.
//
// One Client talks to one ax server; any server of any region answers for
// every task (ids carry their home region and the server forwards). Every
// call takes a context first and honours it: cancel it to abandon the
// request. The Client sets no overall timeout of its own, because Events is
// a long poll; bound calls with ctx, or give an *http.Client with
// WithHTTPClient.
//
// # Wire types
//
// Requests and answers are the types of package apiv1 (shared with the
// server) and task.Spec / task.Task. DAGs and schedules pass through as
// json.RawMessage: the client adds nothing to them.
//
// # Errors
//
// A non-2xx answer is an *APIError carrying the HTTP status, the error code,
// message and field of the body {"error":{...}}, the Retry-After delay and,
// on 422, the placement explanation. Match kinds with errors.Is against the
// sentinels (ErrNotFound, ErrConflict, ErrSaturated, ...), read the details
// with errors.As:
//
//	_, err := c.Submit(ctx, spec)
//	var apiErr *client.APIError
//	switch {
//	case errors.Is(err, client.ErrSaturated) && errors.As(err, &apiErr):
//		time.Sleep(apiErr.RetryAfter)
//	case errors.Is(err, client.ErrInvalid):
//		// fix the spec: apiErr.Field names the offending field
//	}
//
// A body that is not the JSON error shape (a proxy's HTML page) still gives
// an APIError with the status and the start of the body as the message.
// Transport failures and context errors are returned wrapped, as they are.
//
// # Batches
//
// SubmitBatch sends at most MaxBatch specs in one request; SubmitAll splits
// any number into such batches, waits out 429s, and reports progress.
package client
