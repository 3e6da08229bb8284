package workers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// sessions keeps remote workers' registrations in the region's Redis, so
// that any server of the region serves a worker_id: per worker a hash of
// its registration and a hash of the tasks it holds (id → "lease:seen ms"),
// both expiring 2 × lease after the worker's last claim or report.
type sessions struct {
	rdb   redis.UniversalClient
	lease time.Duration
}

// session is one registration.
type session struct {
	ID     string
	Token  string
	Pool   string
	Types  []string // empty: every type the token allows
	Slots  int
	Name   string
	Labels map[string]string
	// Claim is the worker's last claim that named a claim_id.
	Claim claimRecord
}

// held is one task a worker holds: its lease, and when the worker last
// said it runs it (or was handed it).
type held struct {
	Lease string
	Seen  time.Time
	// Milli is the room the task holds in milli-slots (its
	// task.SlotMilli); 0 in an entry of an older server: a whole slot.
	Milli int
}

// heldValue is a held entry as stored: "lease:seen ms[:milli]", the
// milli-slots only when less than a whole slot.
func heldValue(lease, seen string, milli int) string {
	if milli > 0 && milli < task.MilliSlots {
		return lease + ":" + seen + ":" + strconv.Itoa(milli)
	}
	return lease + ":" + seen
}

// heldRoom is the room the tasks of hs hold, in milli-slots.
func heldRoom(hs map[string]held) int {
	m := 0
	for _, h := range hs {
		if h.Milli > 0 && h.Milli < task.MilliSlots {
			m += h.Milli
		} else {
			m += task.MilliSlots
		}
	}
	return m
}

var idRe = regexp.MustCompile(`^rw-[0-9a-f]{32}$`)

// Keys share the worker id as their hash tag (one Cluster slot).
func regKey(id string) string  { return "ax:rw:{" + id + "}" }
func heldKey(id string) string { return "ax:rw:{" + id + "}:held" }

// errUnknown answers a worker_id that is not (or no longer) registered.
var errUnknown = &endpoint.Error{Code: apiv1.CodeNotFound, Field: "worker_id",
	Msg: "no such worker (unknown or expired after 2 × lease_ms without a claim or report): register again"}

func (s *sessions) ttl() time.Duration { return 2 * s.lease }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "rw-" + hex.EncodeToString(b[:])
}

// create stores a new registration.
func (s *sessions) create(ctx context.Context, se session) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, regKey(se.ID), "tk", se.Token, "po", se.Pool, "ty", strings.Join(se.Types, ","),
			"sl", se.Slots, "nm", se.Name, "lb", labelsJSON(se.Labels))
		p.PExpire(ctx, regKey(se.ID), s.ttl())
		return nil
	})
	if err != nil {
		return fmt.Errorf("workers: register: %w", err)
	}
	return nil
}

// load reads worker id's registration and held tasks, and extends their
// life: errUnknown when it is not registered, or registered by another
// token.
func (s *sessions) load(ctx context.Context, id, token string) (session, map[string]held, error) {
	if !idRe.MatchString(id) {
		return session{}, nil, errUnknown
	}
	var reg *redis.MapStringStringCmd
	var hs *redis.MapStringStringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		reg = p.HGetAll(ctx, regKey(id))
		hs = p.HGetAll(ctx, heldKey(id))
		p.PExpire(ctx, regKey(id), s.ttl())
		p.PExpire(ctx, heldKey(id), s.ttl())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return session{}, nil, fmt.Errorf("workers: load: %w", err)
	}
	m := reg.Val()
	if len(m) == 0 || m["tk"] != token {
		return session{}, nil, errUnknown
	}
	se := session{ID: id, Token: m["tk"], Pool: m["po"], Name: m["nm"]}
	se.Slots, _ = strconv.Atoi(m["sl"])
	se.Claim = parseClaim(m["ci"], m["cs"])
	if m["ty"] != "" {
		se.Types = strings.Split(m["ty"], ",")
	}
	out := make(map[string]held, len(hs.Val()))
	for tid, v := range hs.Val() {
		lease, rest, _ := strings.Cut(v, ":")
		seen, milli, _ := strings.Cut(rest, ":")
		ms, _ := strconv.ParseInt(seen, 10, 64)
		m, _ := strconv.Atoi(milli)
		out[tid] = held{Lease: lease, Seen: time.UnixMilli(ms), Milli: m}
	}
	return se, out, nil
}

// update records tasks the worker now holds (add, seen now) and drops
// those it no longer does.
func (s *sessions) update(ctx context.Context, id string, add map[string]held, drop []string) error {
	if len(add) == 0 && len(drop) == 0 {
		return nil
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(drop) > 0 {
			p.HDel(ctx, heldKey(id), drop...)
		}
		if len(add) > 0 {
			kv := make([]any, 0, 2*len(add))
			for tid, h := range add {
				kv = append(kv, tid, heldValue(h.Lease, now, h.Milli))
			}
			p.HSet(ctx, heldKey(id), kv...)
			p.PExpire(ctx, heldKey(id), s.ttl())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("workers: update held tasks: %w", err)
	}
	return nil
}

// remove forgets worker id.
func (s *sessions) remove(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, regKey(id), heldKey(id)).Err(); err != nil {
		return fmt.Errorf("workers: leave: %w", err)
	}
	return nil
}

// labelsJSON is a registration's labels as stored (bounded by decode).
func labelsJSON(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	b, _ := json.Marshal(l)
	return string(b)
}
