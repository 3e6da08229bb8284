package queue

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// IDs look like "06f1c2d9k3m8q2zx.0.us-east-1": 10 base32hex characters of
// Unix milliseconds and 6 of a per-process sequence seeded randomly (so ids
// sort by creation time and never collide inside one process), then the
// shard and the home region. Any server can find a task from its id alone.

const idAlphabet = "0123456789abcdefghijklmnopqrstuv" // base32hex: sorts like the numbers

// ParsedID is a task id taken apart.
type ParsedID struct {
	Time   time.Time
	Shard  int
	Region string
}

type idGen struct {
	mu  sync.Mutex
	seq uint32
}

var ids idGen

func init() {
	var b [4]byte
	_, _ = rand.Read(b[:])
	ids.seq = binary.BigEndian.Uint32(b[:]) & (1<<30 - 1)
}

// NewID returns a new id for a task accepted in region on shard.
func NewID(region string, shard int, now time.Time) string {
	ms := now.UnixMilli()
	ids.mu.Lock()
	ids.seq = (ids.seq + 1) & (1<<30 - 1)
	seq := ids.seq
	ids.mu.Unlock()
	var b [16]byte
	v := uint64(ms)
	for i := 9; i >= 0; i-- {
		b[i] = idAlphabet[v&31]
		v >>= 5
	}
	for i := 15; i >= 10; i-- {
		b[i] = idAlphabet[seq&31]
		seq >>= 5
	}
	return string(b[:]) + "." + strconv.Itoa(shard) + "." + region
}

// ParseID takes an id apart; ErrBadID when it is not one of ours.
func ParseID(id string) (ParsedID, error) {
	var p ParsedID
	parts := strings.SplitN(id, ".", 3)
	if len(parts) != 3 || len(parts[0]) != 16 || parts[2] == "" || !regionRe.MatchString(parts[2]) {
		return p, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	var ms uint64
	for i := 0; i < 16; i++ {
		c := parts[0][i]
		d := strings.IndexByte(idAlphabet, c)
		if d < 0 {
			return p, fmt.Errorf("%w: %q", ErrBadID, id)
		}
		if i < 10 {
			ms = ms<<5 | uint64(d)
		}
	}
	shard, err := strconv.Atoi(parts[1])
	if err != nil || shard < 0 || shard > 4095 || strconv.Itoa(shard) != parts[1] {
		return p, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	p.Time = time.UnixMilli(int64(ms)).UTC()
	p.Shard = shard
	p.Region = parts[2]
	return p, nil
}
