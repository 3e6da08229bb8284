// Package runid derives the ids of a schedule's runs (docs/schedules.md,
// "Exactly one task per slot"): a slot's run id from the schedule's id
// sequence and the slot, the sequences themselves, and a slot's jitter,
// all computed alike by every federation leader.
//
// Boundary: standard library only.
package runid

import (
	"crypto/rand"
	"encoding/binary"
	"hash/fnv"
	"time"
)

// idAlphabet is queue's id alphabet (base32hex): ids sort like the
// numbers they encode.
const idAlphabet = "0123456789abcdefghijklmnopqrstuv"

// ID is the id of the task of one slot of the schedule whose id
// sequence is seq: a valid ax id whose time part is the slot's Unix
// milliseconds and whose sequence part is seq, on shard 0 of the home
// region. Every leader derives the same id, so the store refuses a second
// task for the slot.
func ID(seq uint64, slot time.Time, home string) string {
	var b [16]byte
	v := uint64(slot.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = idAlphabet[v&31]
		v >>= 5
	}
	for i := 15; i >= 10; i-- {
		b[i] = idAlphabet[seq&31]
		seq >>= 5
	}
	return string(b[:]) + ".0." + home
}

// DerivedSeq is the 30-bit FNV-1a hash of a schedule's tenant and name
// (tenant "": the name's alone). Anyone can compute it, so new schedules
// do not use it (NewSeq).
func DerivedSeq(tenant, name string) uint64 {
	h := fnv.New64a()
	if tenant != "" {
		h.Write([]byte(tenant))
		h.Write([]byte{'/'})
	}
	h.Write([]byte(name))
	s := h.Sum64()
	return (s ^ s>>30 ^ s>>60) & (1<<30 - 1)
}

// NewSeq draws the id sequence of a new schedule: 30 random bits that no
// schedule of any tenant has (taken). Random, not derived from the name:
// no tenant can pick a name whose ids another tenant's schedule would
// need, nor learn from its own ids whether another schedule exists.
func NewSeq(taken map[uint64]bool) (uint32, error) {
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		seq := binary.BigEndian.Uint32(b[:]) & (1<<30 - 1)
		if !taken[uint64(seq)] {
			return seq, nil
		}
	}
}

// Jitter is the run's delay after its slot: in [0, window), from a
// hash of name and slot, so every leader computes the same.
func Jitter(name string, slot time.Time, window time.Duration) time.Duration {
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
