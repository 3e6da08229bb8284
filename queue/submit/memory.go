package submit

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// Memory is how full the region's Redis is and who fills it with payloads.
type Memory struct {
	// Used and Max are the bytes used and maxmemory of the fullest Redis
	// of the region (the highest Used ÷ Max of its masters); Max 0: no
	// Redis has a maxmemory.
	Used, Max int64
	// Top is the tenant whose unfinished tasks hold the most payload bytes
	// in the region, TopBytes those bytes; "" and 0 when no tenant holds
	// any. The default tenant is "default".
	Top      string
	TopBytes int64
}

// Memory reads INFO memory of every master of the region's Redis and the
// tenants' payload bytes (blb of every shard): one round trip per master
// and one per shard.
func (s *Submitter) Memory(ctx context.Context) (Memory, error) {
	var m Memory
	fill := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("queue: memory: %w", err)
		}
		used, max := memoryInfo(info)
		if max > 0 && (m.Max == 0 || float64(used)/float64(max) > float64(m.Used)/float64(m.Max)) {
			m.Used, m.Max = used, max
		}
		return nil
	}
	if cc := s.Cluster(); cc != nil {
		// One master at a time: fill is not safe for concurrent calls.
		var masters []*redis.Client
		if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			masters = append(masters, c)
			return nil
		}); err != nil {
			return Memory{}, fmt.Errorf("queue: memory: %w", err)
		}
		for _, c := range masters {
			if err := fill(ctx, c); err != nil {
				return Memory{}, err
			}
		}
	} else if err := fill(ctx, s.Client()); err != nil {
		return Memory{}, err
	}
	bytes := map[string]int64{}
	for shard := range s.Shards() {
		h, err := s.Client().HGetAll(ctx, queue.BacklogBytesKey(s.Prefix(shard))).Result()
		if err != nil {
			return Memory{}, fmt.Errorf("queue: memory: %w", err)
		}
		for tn, v := range h {
			n, _ := strconv.ParseInt(v, 10, 64)
			bytes[tn] += max(n, 0)
		}
	}
	for tn, n := range bytes {
		if n > m.TopBytes || (n == m.TopBytes && n > 0 && tn < m.Top) {
			m.Top, m.TopBytes = tn, n
		}
	}
	if m.TopBytes > 0 && m.Top == queue.BacklogTenant("default") {
		m.Top = "default"
	}
	return m, nil
}

// memoryInfo reads used_memory and maxmemory from INFO memory's answer.
func memoryInfo(info string) (used, max int64) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			used, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			max, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return used, max
}
