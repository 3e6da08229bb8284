// Package stream serves a region's live updates: GET /v1/events (a bounded
// long-poll) and GET /v1/stream (server-sent events for the dashboard, opened
// with a one-use ticket), all fed by one reader of the region's event stream.
package stream
