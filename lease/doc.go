// Package lease is everything ax does with etcd: sessions (leases kept
// alive), leader election with fencing tokens, keys bound to a session, and
// watched in-memory views of a prefix. It knows nothing of Redis, tasks or
// regions' figures; callers hand it keys and bytes.
package lease
