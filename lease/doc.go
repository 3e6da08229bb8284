// Package lease is everything ax does with etcd: sessions (leases kept
// alive), leader election with fencing tokens, keys bound to a session, and
// watched in-memory views of a prefix. It knows nothing of Redis, tasks or
// regions' figures; callers hand it keys and bytes.
//
// ax talks to two etcd clusters, each described by a Config: the regional
// one elects each cell's leader (/ax/elect/region/<region>), the global one
// holds region registrations (/ax/regions/<region>), the federation election
// (/ax/elect/federation), schedules and prices. A global Config without
// endpoints is the regional one (Config.Or).
//
// # Primitives
//
//   - Session: one lease, renewed every TTL/3 by its own goroutine. It ends
//     for good when etcd says the lease is gone or when no renewal has
//     succeeded for 0.9 TTL; the second is decided locally, so a process cut
//     off from etcd gives its lease up before etcd can expire it.
//   - Manager: always one live Session, replacing a lost one; Current tells
//     who the session is and when that changes.
//   - Campaign and Leadership: one term as leader. Token is the leader key's
//     create revision, strictly higher for every later term, which fenced
//     writes compare. Done closes the moment the term ends: session ended,
//     key deleted, Resign, or Lost (called by the owner when a fenced write
//     is rejected).
//   - Elector: campaigns forever with a fresh session per term and runs the
//     caller's leader function for each term. Observe reads who leads.
//   - Registration: a key bound to a Manager's lease, written again under
//     every new lease.
//   - View: list + watch of a prefix into immutable snapshots, re-listing
//     after compaction, reporting whether it is current (Healthy).
//
// # Timing
//
// The session TTL (DefaultSessionTTL, 5s) bounds how long a dead leader
// blocks its election and how long a stalled one can believe it still leads.
// Across a WAN use 10s or more, so a slow round trip is not taken for a
// death. Every etcd request has a deadline (WithCallTimeout), and requests
// and watches require the member to have a raft leader, so a member cut off
// in a minority fails fast instead of answering stale.
//
// # Goroutines and shutdown
//
// Each Session, Manager, Leadership, Registration and View owns exactly one
// goroutine, started by its constructor and stopped and waited for by its
// Close (Leadership: Resign). Elector.Run runs in its caller's goroutine.
// Shut down from the top: leader functions and Elector.Run (cancel their
// context), then Registrations and Views, then Managers, then the etcd
// clients; a Registration closed after its Manager finds its key already
// gone with the revoked lease.
package lease
