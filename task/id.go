package task

import (
	"crypto/rand"
	"fmt"
	mathrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// IDs look like "06f1c2d9k3m8q2zx.0.us-east-1": 10 base32hex characters of
// Unix milliseconds and 6 of a per-generator sequence, then the shard and
// the home region. Any server can find a task from its id alone. The
// sequence starts at a random point in each millisecond and grows by a
// random step within it, so one generator's ids sort by creation and never
// collide, and two ids tell a tenant nothing of how many other tasks were
// accepted between them.

const idAlphabet = "0123456789abcdefghijklmnopqrstuv" // base32hex: sorts like the numbers

// ParsedID is a task id taken apart.
type ParsedID struct {
	Time   time.Time
	Shard  int
	Region string
}

// IDGen makes task ids. One generator per store: two generators of one
// region collide only when they draw the same sequence in the same
// millisecond, which the store detects (ErrExists) and answers with a new id.
type IDGen struct {
	mu  sync.Mutex
	seq uint32
	ms  int64             // the millisecond of seq
	rng *mathrand.ChaCha8 // nil: the sequence counts by one (NewIDGenAt)
}

// idStartSpan and idMaxStep bound the random start of a millisecond's
// sequence and its random steps: 2^29 ÷ 16 ids fit in one millisecond
// before the 30 bits run out.
const (
	idStartSpan = 1 << 29
	idMaxStep   = 16
)

// NewIDGen returns a generator of unpredictable sequences, from a
// generator seeded by crypto/rand.
func NewIDGen() *IDGen {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	return &IDGen{rng: mathrand.NewChaCha8(seed)}
}

// NewIDGenAt returns a generator whose next id carries sequence seq+1 and
// counts by one from there (tests use it to provoke a collision).
func NewIDGenAt(seq uint32) *IDGen { return &IDGen{seq: seq & (1<<30 - 1)} }

// New returns a new id for a task accepted in region on shard.
func (g *IDGen) New(region string, shard int, now time.Time) string {
	ms := now.UnixMilli()
	g.mu.Lock()
	switch {
	case g.rng == nil:
		g.seq = (g.seq + 1) & (1<<30 - 1)
	case ms != g.ms:
		g.ms, g.seq = ms, uint32(g.rng.Uint64()%idStartSpan)
	default:
		g.seq = min(g.seq+1+uint32(g.rng.Uint64()%idMaxStep), 1<<30-1)
	}
	seq := g.seq
	g.mu.Unlock()
	return FormatID(region, shard, ms, seq)
}

// FormatID writes the id of sequence seq at Unix millisecond ms.
func FormatID(region string, shard int, ms int64, seq uint32) string {
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

// ParseID takes an id apart; ErrBadID when it is not one of ours. It runs
// for every claimed and completed task, so it neither allocates nor uses
// regular expressions.
func ParseID(id string) (ParsedID, error) {
	var p ParsedID
	bad := func() (ParsedID, error) { return ParsedID{}, fmt.Errorf("%w: %q", ErrBadID, id) }
	if len(id) < 20 || id[16] != '.' {
		return bad()
	}
	var ms uint64
	for i := 0; i < 16; i++ {
		d := strings.IndexByte(idAlphabet, id[i])
		if d < 0 {
			return bad()
		}
		if i < 10 {
			ms = ms<<5 | uint64(d)
		}
	}
	rest := id[17:]
	dot := strings.IndexByte(rest, '.')
	if dot < 1 || dot > 4 || (dot > 1 && rest[0] == '0') {
		return bad() // 1–4 digits, no leading zero: shard ≤ 4095 written canonically
	}
	shard := 0
	for i := 0; i < dot; i++ {
		c := rest[i]
		if c < '0' || c > '9' {
			return bad()
		}
		shard = shard*10 + int(c-'0')
	}
	region := rest[dot+1:]
	if shard > 4095 || !isRegionName(region) {
		return bad()
	}
	p.Time = time.UnixMilli(int64(ms)).UTC()
	p.Shard = shard
	p.Region = region
	return p, nil
}

// isRegionName is regionRe (^[a-z0-9][a-z0-9-]{0,62}$) without the regexp.
func isRegionName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidRegionName reports whether s can be a region's name (lowercase
// letters, digits and '-', at most 63, not starting with '-').
func ValidRegionName(s string) bool { return isRegionName(s) }

// WithSeq returns the id with its sequence part (characters 10–15) set
// from the low 30 bits of v: the same time, shard and region, so the new id
// lives where the original does. The caller must pass a well-formed id.
func WithSeq(id string, v uint64) string {
	var seq [6]byte
	for i := 5; i >= 0; i-- {
		seq[i] = idAlphabet[v&31]
		v >>= 5
	}
	return id[:10] + string(seq[:]) + id[16:]
}
