package queue

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limit kinds: what a limit key counts (docs/limits.md).
const (
	LimitType   = "type"   // every task of a task type
	LimitTenant = "tenant" // every task of a tenant
	LimitKey    = "key"    // every task that names the limit_key
	// LimitPool: every task a pool runs; the leader's limit of a pool's
	// capacity window (region), not an operator's.
	LimitPool = "pool"
)

// Limit is a rate and concurrency limit on one key of a region (its share
// of a federation-wide limit already taken: see docs/limits.md). Rate 0
// and Concurrency 0 mean no such limit.
type Limit struct {
	Kind, Name  string
	Rate        float64 // tasks started per second, over every worker of the region
	Burst       int     // tasks that may start at once after a quiet spell (default: max(1, Rate))
	Concurrency int     // tasks RUNNING at once
	// Closed: a concurrency of none for now (a closed capacity window):
	// nothing of the key starts until it is written with some.
	Closed bool
}

// KeyOfLimit is the key's name in the store: 'y:', 'n:', 'k:' or 'c:' and
// the name.
func KeyOfLimit(kind, name string) (string, error) {
	switch kind {
	case LimitType:
		return "y:" + name, nil
	case LimitTenant:
		return "n:" + name, nil
	case LimitKey:
		return "k:" + name, nil
	case LimitPool:
		return "c:" + name, nil
	}
	return "", fmt.Errorf("queue: limit kind %q is not type, tenant, key or pool", kind)
}

// movedPart is the part a shard's "a b part" value holds, 0 for "a b 1 z"
// (limitPart, fairPart).
func MovedPart(v string) int {
	f := strings.Fields(v)
	if len(f) < 3 || len(f) > 3 && f[3] == "z" {
		return 0
	}
	c, _ := strconv.Atoi(f[2])
	return c
}

// MaxRetryAfter bounds a handler's retry after: a pause longer than this is
// cut to it, so a mistaken answer cannot stop a key for days.
const MaxRetryAfter = time.Hour

// LimitState is what the store holds for one limit key on one shard (tests,
// status).
type LimitState struct {
	Running     int       // tasks RUNNING under its concurrency limit
	Parked      int       // READY tasks set aside until it has room
	PausedUntil time.Time // zero: not paused
}

// limitFigures are a limit's rate (milli-tasks/s, at least 1) and burst
// (default max(1, rate)) over the region; 0, 0 without a rate.
func LimitFigures(l Limit) (rateMilli int64, burst int) {
	if l.Rate <= 0 {
		return 0, 0
	}
	rateMilli = max(int64(math.Round(l.Rate*1000)), 1)
	burst = l.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(l.Rate)))
	}
	return rateMilli, burst
}

// sharePart is one shard's part of a limit and, read back, the key's work
// there: tasks of it running, parked, and whether its bucket was spent
// within a refill.
type SharePart struct {
	Rate            int64 // milli-tasks/s; 0 with burst 0: none (or no rate)
	Burst, Conc     int
	Running, Parked int
	Busy            bool
	Stored          string // the lim hash's value, as read ("": none)
}

// parsePart reads a lim hash value (limitPart): a rate part of none is
// written "1 0 …" (a bucket of no tokens), a concurrency part of none "… 1 z".
func ParsePart(v string) SharePart {
	f := strings.Fields(v)
	if len(f) < 3 {
		return SharePart{}
	}
	p := SharePart{Conc: MovedPart(v)}
	p.Rate, _ = strconv.ParseInt(f[0], 10, 64)
	p.Burst, _ = strconv.Atoi(f[1])
	if p.Rate == 0 || p.Burst == 0 {
		p.Rate, p.Burst = 0, 0
	}
	return p
}
