package schedule

import (
	"encoding/binary"
	"hash/fnv"
	"time"
)

// idAlphabet is queue's id alphabet (base32hex): ids sort like the
// numbers they encode.
const idAlphabet = "0123456789abcdefghijklmnopqrstuv"

// TaskID is the id of the task of one slot of tenant's schedule name: a
// valid ax id whose time part is the slot's Unix milliseconds and whose
// sequence part is a hash of tenant and name (idSeq), on shard 0 of the
// home region. Every leader derives the same id, so the store refuses a
// second task for the slot; two tenants' schedules of one name have
// different ids. tenant "" is a definition stored before tenants had
// namespaces: its ids hash the name alone, as they did then.
func TaskID(tenant, name string, slot time.Time, home string) string {
	var b [16]byte
	v := uint64(slot.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = idAlphabet[v&31]
		v >>= 5
	}
	h := idSeq(tenant, name)
	for i := 15; i >= 10; i-- {
		b[i] = idAlphabet[h&31]
		h >>= 5
	}
	return string(b[:]) + ".0." + home
}

// idSeq is the 30-bit hash of a schedule's tenant and name used in its
// task ids (tenant "": the name's alone). Two schedules with the same hash
// would share ids; creation refuses a name whose hash another schedule has.
func idSeq(tenant, name string) uint64 {
	h := fnv.New64a()
	if tenant != "" {
		h.Write([]byte(tenant))
		h.Write([]byte{'/'})
	}
	h.Write([]byte(name))
	s := h.Sum64()
	return (s ^ s>>30 ^ s>>60) & (1<<30 - 1)
}

// jitterOffset is the run's delay after its slot: in [0, window), from a
// hash of name and slot, so every leader computes the same.
func jitterOffset(name string, slot time.Time, window time.Duration) time.Duration {
	ms := window.Milliseconds()
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot.UnixMilli()))
	h.Write(b[:])
	return time.Duration(h.Sum64()%uint64(ms)) * time.Millisecond
}
