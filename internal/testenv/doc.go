// Package testenv starts the real servers tests run against: redis-server
// processes on free ports and an in-process etcd (embed). Nothing is mocked.
// A missing redis-server binary fails the test loudly; it never skips.
package testenv
