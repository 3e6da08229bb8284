// Package history keeps a server's last hour of samples for the
// dashboard's charts and serves them at GET /v1/history, scoped to the
// caller's tenant.
package history
