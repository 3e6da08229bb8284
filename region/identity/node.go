package identity

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Where a connection's Redis keeps its identity. A server says what it is
// in its HELLO answer ("mode"): a Sentinel holds no data and has no
// identity; a standalone Redis (a Sentinel's master or replica too) keeps
// it in Key; each node of a Redis Cluster keeps its own, in the slot of
// its own it serves first (slotKey), so that every node of a cluster can be
// checked on a connection of its own.

// Server modes in a HELLO answer.
const (
	modeSentinel = "sentinel"
	modeCluster  = "cluster"
)

// node is where the Redis a connection reaches keeps its identity.
type node struct {
	// key holds the identity; "" when there is none to check: a Sentinel,
	// or a cluster node that serves no slot (an empty master).
	key string
	// replica: a cluster replica, read after READONLY and never marked
	// (it takes its master's key by replication).
	replica bool
}

// probe asks the server of cn what it is (HELLO) and reads Key in the same
// round trip: the answer for a standalone Redis. For a cluster node it
// finds the node's own key and reads that. got is nil when the key is
// unset.
func probe(ctx context.Context, cn *redis.Conn) (n node, got []byte, err error) {
	var hello *redis.Cmd
	var get *redis.StringCmd
	_, _ = cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		hello = p.Do(ctx, "HELLO")
		get = p.Get(ctx, Key)
		return nil
	})
	switch modeOf(hello.Val()) {
	case modeSentinel:
		return node{}, nil, nil
	case modeCluster:
		if n, err = clusterNode(ctx, cn); err != nil || n.key == "" {
			return n, nil, err
		}
		got, err = readReplica(ctx, cn, n)
		return n, got, err
	}
	// A server older than HELLO (Redis 6) answers it with an error: it is
	// read as a standalone Redis.
	got, err = get.Bytes()
	if err == redis.Nil {
		return node{key: Key}, nil, nil
	}
	return node{key: Key}, got, err
}

// modeOf is the "mode" of a HELLO answer (a map in RESP3, a flat list of
// pairs in RESP2), "" when there is none.
func modeOf(v any) string {
	switch m := v.(type) {
	case map[any]any:
		s, _ := m["mode"].(string)
		return s
	case map[string]any:
		s, _ := m["mode"].(string)
		return s
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if k, _ := m[i].(string); k == "mode" {
				s, _ := m[i+1].(string)
				return s
			}
		}
	}
	return ""
}

// clusterNode finds the identity key of the cluster node cn reaches: the
// key of the first slot it serves, as a master or a replica.
func clusterNode(ctx context.Context, cn *redis.Conn) (node, error) {
	var id *redis.StringCmd
	var slots *redis.ClusterSlotsCmd
	if _, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		id = p.ClusterMyID(ctx)
		slots = p.ClusterSlots(ctx)
		return nil
	}); err != nil {
		return node{}, fmt.Errorf("cluster node: %w", err)
	}
	me := id.Val()
	var n node
	first := -1
	for _, s := range slots.Val() {
		for i, nd := range s.Nodes {
			if nd.ID == me && (first < 0 || s.Start < first) {
				first, n.replica = s.Start, i > 0
			}
		}
	}
	if first >= 0 {
		n.key = slotKey(first)
	}
	return n, nil
}

// readReplica reads n's key on its node: a replica serves reads only
// after READONLY, which the connection drops again (READWRITE) before it
// is used.
func readReplica(ctx context.Context, cn *redis.Conn, n node) ([]byte, error) {
	if !n.replica {
		b, err := cn.Get(ctx, n.key).Bytes()
		if err == redis.Nil {
			return nil, nil
		}
		return b, err
	}
	var get *redis.StringCmd
	_, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ReadOnly(ctx)
		get = p.Get(ctx, n.key)
		p.ReadWrite(ctx)
		return nil
	})
	if err == redis.Nil || get.Err() == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return get.Bytes()
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// slotKey is the identity key of a cluster node whose first slot is slot:
// Key with a hash tag that hashes to slot.
func slotKey(slot int) string { return Key + ":{" + slotTags()[slot] + "}" }

// slotTags is, for every slot, the smallest decimal number whose CRC16
// (the cluster's key hash) falls in it.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, slots)
	left := slots
	for i := 0; left > 0; i++ {
		s := strconv.Itoa(i)
		if k := keySlot(s); tags[k] == "" {
			tags[k] = s
			left--
		}
	}
	return tags
})

// keySlot is Redis Cluster's slot of a key without a hash tag: CRC16
// (XMODEM) mod 16384.
func keySlot(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slots
}
