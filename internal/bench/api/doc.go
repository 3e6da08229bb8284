// Package api is `ax bench api`: it starts real `ax server` and `ax worker`
// processes over their own etcd and Redis servers and measures the HTTP API
// path end to end (submit, place, hand off, claim, ack).
package api
