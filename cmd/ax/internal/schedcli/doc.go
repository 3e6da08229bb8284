// Package schedcli holds the ax schedule commands that run a schedule's
// past periods: backfill, rerun and backfills. The CLI's root (package
// main) gives them its environment through Run.
package schedcli
